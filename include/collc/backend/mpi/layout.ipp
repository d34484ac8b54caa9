#pragma once
#include <collc/backend/mpi/layout.hpp>

#include <collc/error.hpp>

#include <algorithm>
#include <variant>

namespace collc::mpi {

COLLC_INLINE std::size_t lowering_chunk_bytes(collective c, std::size_t bytes, int ranks, bool one_node,
                                              bool oversubscribed, std::size_t chunk_bytes) noexcept {
  const bool pipelines =  // measured faster pipelined (layout.hpp)
      c == collective::bcast || (c == collective::reduce && ranks == 2 && bytes <= (std::size_t{2} << 20));
  const bool pipelined = pipelines && ranks > 1 && one_node && !oversubscribed && bytes > 2 * pipeline_chunk_bytes;
  return pipelined ? std::min(pipeline_chunk_bytes, chunk_bytes / 2) : chunk_bytes;
}

COLLC_INLINE plan_layout layout_of(const std::vector<ir::program>& lowered, std::size_t chunk, std::size_t count,
                                   std::size_t elem_size, std::size_t chunk_bytes, int ranks) {
  plan_layout l;
  for (const auto& p : lowered) {
    if (p.ranks != ranks) {
      std::string msg = "program for ";
      msg += std::to_string(p.ranks);
      msg += " ranks on a communicator of ";
      msg += std::to_string(ranks);
      throw error(errc::invalid_argument, msg);
    }
    l.flags = std::max(l.flags, p.flags);
    l.shm_elems = std::max(l.shm_elems, p.shm_count);
    l.scratch_elems = std::max(l.scratch_elems, p.scratch_count);
    l.max_count = std::max(l.max_count, p.count);
  }
  const auto messages = [](const ir::program& p) {
    for (const auto& code : p.code)
      for (const auto& ins : code)
        if (std::holds_alternative<ir::send>(ins) || std::holds_alternative<ir::recv>(ins)) return true;
    return false;
  };
  l.any_rank_messages = std::any_of(lowered.begin(), lowered.end(), messages);
  // Where both copies do not fit in the flag line (29 to 56 bytes),
  // alternating wins: on an oversubscribed node the entry wait costs a
  // context switch (P = 4, 32 B: 10 us alternating, 20 us with the payload in
  // the line); on two ranks with a core each the payload in the line gained
  // little (32 B: 0.47-0.50 us against 0.53 us).
  const int copies = ir::shm_copies_for(lowered, elem_size, chunk_bytes);
  l.alternate = copies > 1;
  l.shm_copies = copies;
  l.runs = ir::make_runs({lowered, chunk}, count, copies);
  for (const auto& p : l.runs.programs) l.flags = std::max(l.flags, p.flags);
  const std::size_t data = l.shm_elems * elem_size;
  const auto ncopies = static_cast<std::size_t>(copies);
  l.data_in_flag_line = l.flags == 1 && data > 0 && 8 + ncopies * data <= 64 && elem_size <= 8;
  // A wait finds its signal's word from its execution (engine.hpp,
  // wait_word) when every execution signals alike: one program.
  if (l.alternate && !l.data_in_flag_line && l.runs.programs.size() == 1) {
    l.signal_beside_data = l.flags == 1 && data > 0 && 8 + data <= 64 && elem_size <= 8;
    l.flag_words = l.signal_beside_data ? copies : std::min(copies, 8);
  }
  l.copy_bytes = l.data_in_flag_line ? data : (data + 63) / 64 * 64;
  l.slot_bytes = l.data_in_flag_line    ? 64
                 : l.signal_beside_data ? ncopies * 64
                                        : static_cast<std::size_t>(l.flags) * 64 + ncopies * l.copy_bytes;
  return l;
}

COLLC_INLINE std::string plan_layout::to_string(std::size_t elem_size) const {
  std::string s = "flags ";
  s += std::to_string(flags);
  s += ", shm ";
  s += std::to_string(shm_elems * elem_size);
  s += " B";
  if (alternate) {
    s += " x ";
    s += std::to_string(shm_copies);
    s += " (alternating)";
  }
  if (data_in_flag_line) s += " in the flag line";
  s += ", scratch ";
  s += std::to_string(scratch_elems * elem_size);
  s += " B, slot ";
  s += std::to_string(slot_bytes);
  s += " B, ";
  s += std::to_string(runs.programs.size());
  s += runs.programs.size() == 1 ? " program, " : " programs, ";
  s += std::to_string(runs.executions_per_call);
  s += runs.executions_per_call == 1 ? " execution per call" : " executions per call";
  if (runs.executions_per_call > 1) {
    s += " (chunk ";
    s += std::to_string(runs.chunk);
    s += " elements)";
  }
  if (any_rank_messages) s += ", messages between nodes";
  if (signal_beside_data) {
    s += ", each copy in a line behind its signal";
  } else if (flag_words > 1) {
    s += ", signals over ";
    s += std::to_string(flag_words);
    s += " words per flag line";
  }
  return s;
}

}  // namespace collc::mpi
