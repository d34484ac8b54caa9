#pragma once
// Property 5, static part: sends pair with recvs, waits with signals.
#include <collc/ir/verify.hpp>

#include <collc/ir/verify/sequence.ipp>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace collc::ir::detail::verification {

/// Program k of the sequence (its signals counted). The k-th send on a
/// channel pairs with the k-th recv in every execution, so per execution the
/// numbers and the element counts must agree; a wait must name a signal that
/// exists.
COLLC_INLINE finding check_matching(const sequence& s, std::size_t k) {
  const program& cur = *s.programs[k];
  struct ends {
    std::vector<std::pair<std::ptrdiff_t, std::size_t>> sends, recvs;  // (index, count)
  };
  std::unordered_map<std::uint64_t, ends> channels;
  for (int r = 0; r < s.ranks; ++r) {
    const auto& code = cur.code[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < code.size(); ++i) {
      if (const auto* sd = std::get_if<send>(&code[i]))
        channels[s.channel(r, sd->peer, sd->tag)].sends.emplace_back(static_cast<std::ptrdiff_t>(i), sd->count);
      else if (const auto* v = std::get_if<recv>(&code[i]))
        channels[s.channel(v->peer, r, v->tag)].recvs.emplace_back(static_cast<std::ptrdiff_t>(i), v->count);
    }
  }
  std::unordered_map<std::uint64_t, std::size_t> sent, received;
  for (int r = 0; r < s.ranks; ++r) {
    const auto& code = cur.code[static_cast<std::size_t>(r)];
    for (std::size_t j = 0; j < code.size(); ++j) {
      const auto i = static_cast<std::ptrdiff_t>(j);
      if (const auto* w = std::get_if<wait>(&code[j])) {
        // A wait beyond the peer's signals of this execution needs the next
        // execution's, which never comes after the last one.
        const std::int64_t n = s.signals[k * s.slots() + s.flag_slot(w->peer, w->flag)];
        if (w->value > n)
          return violation(property::deadlock, r, i, 0,
                           cat("waits for rank ", w->peer, " flag ", w->flag, " >= ", w->value, ", but rank ", w->peer,
                               " signals flag ", w->flag, " only ", n, " time(s) per execution"));
      } else if (const auto* sd = std::get_if<send>(&code[j])) {
        const auto key = s.channel(r, sd->peer, sd->tag);
        const ends& e = channels[key];
        const std::size_t n = sent[key]++;
        if (n >= e.recvs.size())
          return violation(property::deadlock, r, i, -1,
                           cat("send to rank ", sd->peer, " tag ", sd->tag, " has no matching recv (rank ", r,
                               " sends ", e.sends.size(), " message(s) with this tag to rank ", sd->peer,
                               " per execution, which receives ", e.recvs.size(), ')'));
      } else if (const auto* v = std::get_if<recv>(&code[j])) {
        const auto key = s.channel(v->peer, r, v->tag);
        const ends& e = channels[key];
        const std::size_t n = received[key]++;
        if (n >= e.sends.size())
          return violation(property::deadlock, r, i, -1,
                           cat("recv from rank ", v->peer, " tag ", v->tag, " has no matching send (rank ", v->peer,
                               " sends ", e.sends.size(), " message(s) with this tag to rank ", r,
                               " per execution, which receives ", e.recvs.size(), ')'));
        if (e.sends[n].second != v->count)
          return violation(
              property::well_formed, r, i, -1,
              cat("recv of ", v->count, " element(s) from rank ", v->peer, " tag ", v->tag, " matches a send of ",
                  e.sends[n].second, " element(s) (rank ", v->peer, " instruction ", e.sends[n].first, ')'));
      }
    }
  }
  return std::nullopt;
}

}  // namespace collc::ir::detail::verification
