#pragma once
/// \file
/// The text form of a program: what the tools print and what wisdom files
/// store. It is line based, versioned and strict, so a truncated or edited
/// file is rejected with the line number instead of running a wrong plan.
///
///     collc-program 1                      <- format version (text_version)
///     collective=allreduce                 <- header: every field exactly once,
///     ranks=2                                 any order, `key=value`
///     count=8
///     block_stride=0
///     root=0
///     commutative_only=false
///     shm_count=8
///     scratch_count=0
///     flags=1
///     node_of=[]                           <- [] or one node id per rank: [0,0,1,1]
///     name="shm allreduce"                 <- quoted; \\ \" \n \r \t \xHH escapes
///     rank 0:                              <- sections rank 0 .. ranks-1, in order
///       copy shm@0+0 <- send+0 x8
///       signal f0
///       wait r1.f0 >= 1
///       reduce recv+0 <- shm@0+0, shm@1+0 x8
///     rank 1:
///       ...
///     end                                  <- required: detects truncation
///
/// Instructions (one per line, tokens separated by blanks):
///     copy DST <- SRC xN            reduce DST <- A, B xN
///     signal fF                     wait rP.fF >= V          (V may be <= 0)
///     send ->rP tag T SRC xN        recv <-rP tag T DST xN
///     fence
/// A ref is `buf+offset` for the executing rank's own send/recv/scratch and
/// `buf@owner+offset` otherwise; shm refs always name their owner. The parser
/// accepts both spellings for every buffer. Blank lines and lines starting
/// with `#` are ignored.
///
/// parse_program checks syntax and structure only: numbers fit their fields,
/// counts are not negative, ranks/peers/owners lie in [0, ranks), flags in
/// [0, flags), node_of has one entry per rank. Buffer capacities, matching
/// and ordering are collc::ir::verify's job.
#include <collc/config.hpp>
#include <collc/ir/program.hpp>

#include <ostream>
#include <string>
#include <string_view>

namespace collc::ir {

/// Format version written by to_text and the only one parse_program reads.
inline constexpr int text_version = 1;

/// One readable line, every owner spelled out.
/// Example: to_string(instruction{copy{{buffer::recv, 0, 0}, {buffer::shm, 2, 8}, 8}}) == "copy recv@0+0 <- shm@2+8 x8"
std::string to_string(const instruction& ins);

/// As executed by `rank`: its own send/recv/scratch are written without owner.
/// Example: to_string(instruction{copy{{buffer::recv, 0, 0}, {buffer::shm, 2, 8}, 8}}, 0) == "copy recv+0 <- shm@2+8
/// x8"
std::string to_string(const instruction& ins, int rank);

/// Example: to_string(ref{buffer::shm, 3, 16}) == "shm@3+16"
std::string to_string(const ref& r);

/// Example: to_string(ref{buffer::send, 2, 4}, 2) == "send+4"
std::string to_string(const ref& r, int rank);

std::ostream& operator<<(std::ostream& os, const ref& r);
std::ostream& operator<<(std::ostream& os, const instruction& ins);

/// The full text form (see the file comment); parse_program(to_text(p)) == p.
/// Throws collc::error(errc::invalid_argument) if p.code does not hold
/// p.ranks programs or node_of is neither empty nor one entry per rank.
/// Example: std::ofstream("plan.wisdom") << collc::ir::to_text(p);
std::string to_text(const program& p);

/// Prints the text form as is (no checks), e.g. for test failure messages.
std::ostream& operator<<(std::ostream& os, const program& p);

/// One instruction in the syntax of the file comment, as executed by `rank`
/// (refs without `@owner` belong to `rank`). Peers, owners and flags need only
/// be non-negative here. Throws collc::error(errc::parse_error).
/// Example: parse_instruction("wait r1.f0 >= 2", 0) == instruction{wait{1, 0, 2}}
instruction parse_instruction(std::string_view line, int rank);

/// Reads the text form written by to_text. Throws collc::error(errc::parse_error)
/// naming the line number and the offending token on any deviation: unknown
/// version, field or opcode, missing or duplicate field, numbers that overflow
/// their field or are negative where a count is expected, rank sections out of
/// order or missing, a missing `end`, trailing garbage.
/// Example: auto p = collc::ir::parse_program(read_file("plan.wisdom"));
program parse_program(std::string_view text);

/// Graphviz digraph of the data flow: one cluster per rank (nodes are its
/// instructions in program order), and edges for signal -> wait, send -> recv,
/// and shm data written by one rank and read by another (every overlapping
/// writer, a superset of the real flow). Waits on an earlier execution's
/// signal are dashed. Used by `collc show --dot`.
/// Example: std::ofstream("p.dot") << collc::ir::to_dot(p);  // dot -Tsvg p.dot
std::string to_dot(const program& p);

}  // namespace collc::ir

#if COLLC_HEADER_ONLY
#include <collc/ir/text.ipp>
#endif
