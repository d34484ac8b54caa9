#pragma once
// Definitions of ir/cost.hpp: the event-driven cost simulation.
#include <collc/ir/cost.hpp>

#include <collc/error.hpp>
#include <collc/ir/program.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace collc::ir {

COLLC_INLINE void machine_model::validate() const {
  using collc::detail::cat;
  const std::pair<const char*, double> terms[] = {{"alpha_net", alpha_net}, {"beta_net", beta_net},
                                                  {"o_net", o_net},         {"alpha_sync", alpha_sync},
                                                  {"beta_copy", beta_copy}, {"gamma", gamma}};
  for (const auto& [name, v] : terms)
    if (!(v >= 0) || std::isinf(v))
      throw error(errc::invalid_argument,
                  cat("machine_model::", name, " must be finite and >= 0, got ", std::to_string(v)));
  if (!(shm_bandwidth > 0))
    throw error(errc::invalid_argument,
                cat("machine_model::shm_bandwidth must be > 0 bytes/s, got ", std::to_string(shm_bandwidth)));
}

namespace detail {

/// The terms of machine_model by name, in declaration order.
template <class Model, class F>
constexpr void for_each_term(Model& m, F f) {
  f("alpha_net", m.alpha_net);
  f("beta_net", m.beta_net);
  f("o_net", m.o_net);
  f("alpha_sync", m.alpha_sync);
  f("beta_copy", m.beta_copy);
  f("gamma", m.gamma);
  f("shm_bandwidth", m.shm_bandwidth);
}

}  // namespace detail

COLLC_INLINE std::string to_string(const machine_model& m) {
  std::string out;
  detail::for_each_term(m, [&](const char* name, double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += buf;
  });
  return out;
}

COLLC_INLINE machine_model parse_machine_model(std::string_view text) {
  using collc::detail::cat;
  machine_model m;
  std::vector<std::string> seen;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == ',' || text[i] == '\t') {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != ',' && text[end] != '\t') ++end;
    const std::string pair(text.substr(i, end - i));
    i = end;
    const auto eq = pair.find('=');
    if (eq == std::string::npos)
      throw error(errc::invalid_argument, cat("machine model: '", pair, "' is not name=value"));
    const std::string name = pair.substr(0, eq), value = pair.substr(eq + 1);
    double* term = nullptr;
    detail::for_each_term(m, [&](const char* n, double& v) {
      if (name == n) term = &v;
    });
    if (term == nullptr)
      throw error(errc::invalid_argument,
                  cat("machine model: unknown term '", name,
                      "' (terms: alpha_net, beta_net, o_net, alpha_sync, beta_copy, gamma, shm_bandwidth)"));
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      throw error(errc::invalid_argument, cat("machine model: '", name, "' given twice"));
    seen.push_back(name);
    // from_chars: no locale (a decimal comma would split the pair), and
    // the whole value must be the number.
    double v = 0;
    const char* last = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), last, v);
    if (value.empty() || ec != std::errc{} || ptr != last)
      throw error(errc::invalid_argument, cat("machine model: '", pair, "': '", value, "' is not a number"));
    *term = v;
  }
  m.validate();
  return m;
}

namespace detail {

using collc::detail::cat;

/// The event-driven evaluation behind predict(); see the file comment.
class cost_simulation {
 public:
  cost_simulation(const program& p, const machine_model& m, std::size_t elem_bytes)
      : p_(p), m_(m), eb_(static_cast<double>(elem_bytes)) {
    m.validate();
    if (p.ranks < 1 || p.code.size() != static_cast<std::size_t>(p.ranks))
      throw error(errc::invalid_argument,
                  cat("cost: program has ", p.code.size(), " rank programs for ", p.ranks, " ranks"));
    if (elem_bytes == 0) throw error(errc::invalid_argument, "cost: element size must be >= 1 byte, got 0");
    const auto P = idx(p.ranks);
    int nodes = 1;
    for (int r = 0; r < p.ranks; ++r) nodes = std::max(nodes, p.node(r) + 1);
    clock_.assign(P, 0.0);
    pc_.assign(P, 0);
    finish_.assign(P, 0.0);
    send_done_.assign(P, 0.0);
    stamps_.assign(P, std::vector<std::vector<double>>(static_cast<std::size_t>(std::max(p.flags, 1))));
    waiters_.assign(P, {});
    out_free_.assign(static_cast<std::size_t>(nodes), 0.0);
    in_free_.assign(static_cast<std::size_t>(nodes), 0.0);
    busy_.assign(static_cast<std::size_t>(nodes), {});
  }

  std::vector<double> run() {
    for (int r = 0; r < p_.ranks; ++r) ready_.push({0.0, r});
    int done = 0;
    while (!ready_.empty()) {
      const auto [t, r] = ready_.top();
      ready_.pop();
      clock_[idx(r)] = std::max(clock_[idx(r)], t);
      if (step(r)) ++done;
    }
    if (done != p_.ranks) {
      for (int r = 0; r < p_.ranks; ++r)
        if (pc_[idx(r)] < p_.code[idx(r)].size())
          throw error(errc::invalid_argument,
                      cat("cost: program '", p_.name, "' deadlocks: rank ", r, " blocks at instruction ", pc_[idx(r)]));
    }
    return finish_;
  }

 private:
  using event = std::pair<double, int>;  // (time, rank), earliest first
  static constexpr std::size_t idx(int r) { return static_cast<std::size_t>(r); }

  // Runs rank r from its clock until it advances time, blocks or ends.
  // Returns true when r finished.
  bool step(int r) {
    const auto& code = p_.code[idx(r)];
    double& now = clock_[idx(r)];
    while (pc_[idx(r)] < code.size()) {
      const instruction& ins = code[pc_[idx(r)]];
      if (const auto* c = std::get_if<copy>(&ins)) {
        ++pc_[idx(r)];
        return advance(r, now + memory_time(r, now, static_cast<double>(c->count) * eb_, false));
      }
      if (const auto* x = std::get_if<reduce>(&ins)) {
        ++pc_[idx(r)];
        return advance(r, now + memory_time(r, now, static_cast<double>(x->count) * eb_, true));
      }
      if (const auto* s = std::get_if<signal>(&ins)) {
        ++pc_[idx(r)];
        stamps_[idx(r)][flag_index(s->flag)].push_back(now);
        wake_waiters(r);
        continue;
      }
      if (const auto* w = std::get_if<wait>(&ins)) {
        if (w->value <= 0 || w->peer == r) {  // an earlier execution, or a rank's own flag (program order)
          ++pc_[idx(r)];
          continue;
        }
        const auto& st = stamps_[idx(w->peer)][flag_index(w->flag)];
        if (static_cast<std::int64_t>(st.size()) < w->value) {
          waiters_[idx(w->peer)].push_back(r);
          return false;  // parked until the peer signals
        }
        ++pc_[idx(r)];
        const double t = std::max(now, st[static_cast<std::size_t>(w->value - 1)] + m_.alpha_sync);
        if (t > now) return advance(r, t);
        continue;
      }
      if (const auto* s = std::get_if<send>(&ins)) {
        ++pc_[idx(r)];
        // The sender's processor is busy o_net injecting it (LogP's o).
        post_send(r, *s, now + m_.o_net);
        if (m_.o_net > 0) return advance(r, now + m_.o_net);
        continue;
      }
      if (const auto* v = std::get_if<recv>(&ins)) {
        auto& q = messages_[key(v->peer, r, v->tag)];
        if (q.arrivals.empty()) {
          q.receiver_parked = true;
          return false;  // parked until the send is posted
        }
        ++pc_[idx(r)];
        const double t = std::max(now, q.arrivals.front()) + m_.o_net;  // and the receiver's taking it in
        q.arrivals.pop_front();
        if (t > now) return advance(r, t);
        continue;
      }
      ++pc_[idx(r)];  // fence
      if (send_done_[idx(r)] > now) return advance(r, send_done_[idx(r)]);
    }
    finish_[idx(r)] = now;
    return true;
  }

  bool advance(int r, double t) {
    clock_[idx(r)] = t;
    ready_.push({t, r});
    return false;
  }

  [[nodiscard]] std::size_t flag_index(int flag) const {
    if (flag < 0 || flag >= std::max(p_.flags, 1))
      throw error(errc::invalid_argument, cat("cost: flag ", flag, " out of range"));
    return static_cast<std::size_t>(flag);
  }

  // Duration of a memory operation of `bytes` starting at `now` on r's node:
  // the node's bandwidth is shared with every rank of the node still busy.
  double memory_time(int r, double now, double bytes, bool is_reduce) {
    auto& busy = busy_[static_cast<std::size_t>(p_.node(r))];
    while (!busy.empty() && busy.top() <= now) busy.pop();
    const int concurrent = static_cast<int>(busy.size()) + 1;
    const double dt = bytes * (is_reduce ? m_.reduce_per_byte(concurrent) : m_.copy_per_byte(concurrent));
    if (dt > 0) busy.push(now + dt);
    return dt;
  }

  void post_send(int r, const send& s, double now) {
    const double bytes = static_cast<double>(s.count) * eb_;
    auto& out = out_free_[static_cast<std::size_t>(p_.node(r))];
    auto& in = in_free_[static_cast<std::size_t>(p_.node(s.peer))];
    // Each port is a queue of its own (a NIC interleaves the messages it
    // carries): the message is through when both ports have carried it.
    out = std::max(now, out) + bytes * m_.beta_net;
    in = std::max(now, in) + bytes * m_.beta_net;
    send_done_[idx(r)] = std::max(send_done_[idx(r)], out);
    auto& q = messages_[key(r, s.peer, s.tag)];
    q.arrivals.push_back(std::max(out, in) + m_.alpha_net);
    if (q.receiver_parked) {
      q.receiver_parked = false;
      ready_.push({clock_[idx(s.peer)], s.peer});
    }
  }

  void wake_waiters(int r) {
    auto& w = waiters_[idx(r)];
    for (int q : w) ready_.push({clock_[idx(q)], q});  // each re-checks its wait
    w.clear();
  }

  [[nodiscard]] std::uint64_t key(int from, int to, int tag) const {
    const auto P = static_cast<std::uint64_t>(p_.ranks);
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) * P + static_cast<std::uint64_t>(from)) * P +
           static_cast<std::uint64_t>(to);
  }

  struct channel {
    std::deque<double> arrivals;  // of sends not yet received, in order
    bool receiver_parked = false;
  };

  const program& p_;
  machine_model m_;
  double eb_;
  std::vector<double> clock_, finish_, send_done_;
  std::vector<std::size_t> pc_;
  std::vector<std::vector<std::vector<double>>> stamps_;  // [rank][flag]: time of each signal
  std::vector<std::vector<int>> waiters_;                 // ranks parked on a rank's signals
  std::unordered_map<std::uint64_t, channel> messages_;
  std::vector<double> out_free_, in_free_;  // per node: when its network port is free
  std::vector<std::priority_queue<double, std::vector<double>, std::greater<>>> busy_;  // per node: ends of memory ops
  std::priority_queue<event, std::vector<event>, std::greater<>> ready_;
};

}  // namespace detail

COLLC_INLINE std::vector<double> predict_ranks(const program& p, const machine_model& m, std::size_t elem_bytes) {
  return detail::cost_simulation(p, m, elem_bytes).run();
}

COLLC_INLINE double predict(const program& p, const machine_model& m, std::size_t elem_bytes) {
  const auto t = predict_ranks(p, m, elem_bytes);
  return t.empty() ? 0.0 : *std::max_element(t.begin(), t.end());
}

}  // namespace collc::ir
