// Persistent collectives in libcollc_mpi (MPI 4.0, section 6.13):
// MPI_Allreduce_init, MPI_Bcast_init, MPI_Reduce_init, MPI_Allgather_init and
// MPI_Reduce_scatter_block_init (Open MPI 4.1 spells them MPIX_*_init in
// <mpi-ext.h>; both spellings are defined there), and the request functions
// a program completes them with.
//
// A request collc takes is a real MPI request, so that every request function
// accepts it, alone or in an array with the program's other requests: an
// inactive persistent receive from MPI_PROC_NULL (MPI 4.0, section 3.11: it
// completes as soon as it is started), whose handle value maps to the
// persistent_call (interpose.hpp) that does the work. MPI_Start starts both;
// the request is complete when the plan says so, and only then is the
// stand-in completed by the MPI library, so MPI's own request state (active or
// inactive, the status) stays right. Requests that are not collc's go to the
// PMPI_* names after one relaxed atomic load (no collc request alive) or one
// table lookup per request.
#include "interpose.hpp"

#include <mpi.h>
#if defined(OPEN_MPI)
#include <mpi-ext.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pmpi = collc::pmpi;

namespace {

/// One persistent collective collc runs. Used by one thread at a time: MPI
/// forbids concurrent use of one request (MPI 4.0, section 11.6.2).
struct entry {
  std::unique_ptr<pmpi::persistent_call> call;
  MPI_Comm comm;
  pmpi::coll c;
  /// Started and not yet completed by a wait or test: the stand-in is active.
  /// The plan may already be done (a Testall that found other requests still
  /// pending), which persistent_call::test keeps reporting.
  bool started = false;
  int err = MPI_SUCCESS;  // the plan's error, returned when the request completes
};

using key_type = std::uint64_t;
static_assert(sizeof(MPI_Request) <= sizeof(key_type), "an MPI_Request handle fits the table key");

/// The handle's value: a pointer in Open MPI, an int in MPICH.
key_type key_of(MPI_Request r) {
  key_type k = 0;
  std::memcpy(&k, &r, sizeof r);
  return k;
}

struct request_table {
  std::mutex m;
  std::unordered_map<key_type, std::unique_ptr<entry>> by_handle;
  /// Stand-ins of freed requests (inactive), kept for the next request
  /// instead of being freed. MPICH 4.0.2 hands a freed request's object to
  /// the next persistent collective it creates, and its MPID_Startall skips
  /// a request whose point-to-point peer field says MPI_PROC_NULL before it
  /// looks at the request's kind; a collective never sets that field, so one
  /// that inherits a stand-in's object is never started and its MPI_Wait
  /// spins forever (fixed upstream in pmodels/mpich#6357). A program's own
  /// persistent collective that collc leaves to the library (a derived type,
  /// count 0, ...) hung that way after any of collc's requests had been
  /// freed (test pmpi_persistent_reuse). Freed requests to real peers are
  /// harmless: their object carries a real rank.
  std::vector<MPI_Request> spare;
};

/// Never destroyed: requests a program does not free outlive MPI_Finalize, and
/// destroying their plans at exit would call into an MPI (and core state)
/// already gone.
request_table& table() {
  static auto* t = new request_table;
  return *t;
}

/// collc's live requests: zero in most programs, and then no request function
/// looks further.
std::atomic<int> g_live{0};

bool none_live() { return g_live.load(std::memory_order_relaxed) == 0; }

/// How many live requests of collc's hash to each slot: a program's own
/// requests, tested while collc's exist, mostly land on an empty slot and
/// skip the table's lock.
constexpr std::size_t filter_slots = 256;
std::atomic<std::uint32_t> g_filter[filter_slots];

std::size_t slot_of(key_type k) { return static_cast<std::size_t>((k * 0x9e3779b97f4a7c15ull) >> 56); }

bool maybe_ours(MPI_Request r) {
  return r != MPI_REQUEST_NULL && g_filter[slot_of(key_of(r))].load(std::memory_order_relaxed) != 0;
}

entry* find(MPI_Request r) {
  if (none_live() || !maybe_ours(r)) return nullptr;
  auto& t = table();
  const std::lock_guard<std::mutex> lock(t.m);
  const auto it = t.by_handle.find(key_of(r));
  return it == t.by_handle.end() ? nullptr : it->second.get();
}

/// The entries of an array of requests (nullptr where not collc's), under one
/// lock; returns how many are collc's (`out` is filled only when some are).
int find_all(int count, const MPI_Request reqs[], std::vector<entry*>& out) {
  if (none_live() || count <= 0) return 0;
  int first = 0;
  while (first < count && !maybe_ours(reqs[first])) ++first;
  if (first == count) return 0;  // no allocation, no lock
  out.assign(static_cast<std::size_t>(count), nullptr);
  int n = 0;
  auto& t = table();
  const std::lock_guard<std::mutex> lock(t.m);
  for (int i = first; i < count; ++i) {
    if (!maybe_ours(reqs[i])) continue;
    const auto it = t.by_handle.find(key_of(reqs[i]));
    if (it != t.by_handle.end()) out[static_cast<std::size_t>(i)] = it->second.get(), ++n;
  }
  return n;
}

/// A request collc refuses to act on: the diagnosis, then the communicator's
/// error handler decides, as for MPI's own errors (MPI 4.0, section 9.3).
int refuse(const entry& e, const char* function, const char* why) {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "collc pmpi: %s on a persistent collective request (%s_init) on rank %d is not supported: %s\n",
               function, pmpi::mpi_name(e.c), rank, why);
  std::fflush(stderr);
  PMPI_Comm_call_errhandler(e.comm, MPI_ERR_REQUEST);
  return MPI_ERR_REQUEST;
}

/// MPI 4.0, section 6.12: MPI_SOURCE and MPI_TAG of a completed collective's
/// status are undefined; collc reports those of the empty status (section
/// 3.7.3), whatever the stand-in receive from MPI_PROC_NULL wrote.
void collective_status(MPI_Status* s) {
  if (s == MPI_STATUS_IGNORE) return;
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
}

/// The empty status (MPI 4.0, section 3.7.3), for calls that find no active request.
void empty_status(MPI_Status* s) {
  if (s == MPI_STATUS_IGNORE) return;
  s->MPI_SOURCE = MPI_ANY_SOURCE;
  s->MPI_TAG = MPI_ANY_TAG;
  s->MPI_ERROR = MPI_SUCCESS;
  PMPI_Status_set_elements(s, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(s, 0);
}

MPI_Status* status_at(MPI_Status statuses[], int k) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[k];
}

/// Advances a started request without blocking; true once its plan is done
/// (or failed: the error is kept for the completion).
bool poll(entry& e) {
  int err = MPI_SUCCESS;
  const bool done = e.call->test(&err);
  if (err != MPI_SUCCESS) e.err = err;
  return done || err != MPI_SUCCESS;
}

/// Completes a started request whose plan is done: the stand-in (already
/// complete) through the MPI library, so the handle becomes inactive there too.
int finish(entry& e, MPI_Request* r, MPI_Status* status) {
  e.started = false;
  pmpi::requests_started().fetch_sub(1, std::memory_order_relaxed);
  const int err = PMPI_Wait(r, status);
  collective_status(status);
  const int plan_err = std::exchange(e.err, MPI_SUCCESS);
  return plan_err != MPI_SUCCESS ? plan_err : err;
}

/// One turn of the MPI library's progress engine. On MPI_COMM_SELF, not on the
/// request's communicator: the program may have freed that one already
/// (MPI_Comm_free leaves pending requests valid), and a probe on a freed
/// handle crashes Open MPI (SIGSEGV in mca_pml_ob1_recv_req_start).
void turn_mpi() {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

/// Between polls of a plan that is not done: let the MPI library progress
/// the program's other messages (a peer may wait for one of them before it
/// can advance its part of this collective, which MPI's progress rule allows;
/// collc's plans progress only inside their own test), then give the core
/// away (ranks often share cores).
void idle() {
  turn_mpi();
  std::this_thread::yield();
}

/// MPI_Waitall on MPI's own requests only: while collc requests are started,
/// polled with turns for them (interpose.hpp, requests_started).
int waitall_mpi(int count, MPI_Request reqs[], MPI_Status statuses[]) {
  if (pmpi::requests_started().load(std::memory_order_relaxed) == 0) return PMPI_Waitall(count, reqs, statuses);
  for (;;) {
    int flag = 0;
    const int err = PMPI_Testall(count, reqs, &flag, statuses);
    if (err != MPI_SUCCESS || flag != 0) return err;
    pmpi::give_turns(MPI_COMM_NULL);
    std::this_thread::yield();
  }
}

int start_one(entry& e, MPI_Request* r) {
  // MPI 4.0, section 3.9: starting an active request is erroneous; caught
  // here because a plan already done would otherwise start again under the
  // stand-in MPI still holds active.
  if (e.started) return refuse(e, "MPI_Start", "the request is still active (start it again after it completed)");
  const int err = e.call->start();
  if (err != MPI_SUCCESS) return err;
  e.started = true;
  pmpi::requests_started().fetch_add(1, std::memory_order_relaxed);
  return PMPI_Start(r);
}

/// The program's requests of a mixed array, passed to the MPI library as an
/// array of their own; `pos[j]` is the index in the program's array.
struct others {
  std::vector<MPI_Request> reqs;
  std::vector<int> pos;
  std::vector<MPI_Status> statuses;
  bool want_status = false;

  others(int count, const MPI_Request all[], const std::vector<entry*>& ours, MPI_Status user_statuses[]) {
    for (int i = 0; i < count; ++i)
      if (ours[static_cast<std::size_t>(i)] == nullptr) reqs.push_back(all[i]), pos.push_back(i);
    want_status = user_statuses != MPI_STATUSES_IGNORE;
    if (want_status) statuses.resize(reqs.size());
  }
  [[nodiscard]] int size() const { return static_cast<int>(reqs.size()); }
  MPI_Status* status_array() { return want_status ? statuses.data() : MPI_STATUSES_IGNORE; }
  MPI_Status* status_one() { return want_status ? statuses.data() : MPI_STATUS_IGNORE; }
  /// The MPI library may have set completed handles to MPI_REQUEST_NULL.
  void copy_back(MPI_Request all[]) const {
    for (std::size_t j = 0; j < reqs.size(); ++j) all[pos[j]] = reqs[j];
  }
};

/// A persistent collective: collc's request, or the MPI library's own when
/// the core declines (`fallback` creates it).
template <class Fallback>
int create(pmpi::coll c, const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
           MPI_Request* request, Fallback fallback, int send_count = 0, MPI_Datatype send_type = MPI_DATATYPE_NULL) {
  std::unique_ptr<pmpi::persistent_call> call =
      pmpi::make_persistent(c, send, recv, count, type, op, root, comm, send_count, send_type);
  if (!call) return fallback();
  // The stand-in (see the file comment), a spare one if any; tag 0 matches
  // nothing: its source is MPI_PROC_NULL. On MPI_COMM_SELF, not `comm`: a
  // spare outlives the request it served, and must not keep the program's
  // communicator (which it may free) referenced.
  MPI_Request standin = MPI_REQUEST_NULL;
  {
    auto& t = table();
    const std::lock_guard<std::mutex> lock(t.m);
    if (!t.spare.empty()) {
      standin = t.spare.back();
      t.spare.pop_back();
    }
  }
  if (standin == MPI_REQUEST_NULL)
    if (const int err = PMPI_Recv_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, &standin);
        err != MPI_SUCCESS)
      return err;
  *request = standin;
  auto e = std::make_unique<entry>();
  e->call = std::move(call);
  e->comm = comm;
  e->c = c;
  auto& t = table();
  const key_type k = key_of(*request);
  {
    const std::lock_guard<std::mutex> lock(t.m);
    t.by_handle[k] = std::move(e);
  }
  g_filter[slot_of(k)].fetch_add(1, std::memory_order_relaxed);
  g_live.fetch_add(1, std::memory_order_relaxed);
  return MPI_SUCCESS;
}

// The MPI library's own persistent collectives, by the name this MPI gives them.
#if defined(OPEN_MPI) && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define COLLC_PMPI_LIBRARY_INIT(name) PMPIX_##name##_init
#elif defined(MPICH_VERSION) || MPI_VERSION >= 4
#define COLLC_PMPI_LIBRARY_INIT(name) PMPI_##name##_init
#else
#error "libcollc_mpi: this MPI declares no persistent collectives (MPI 4.0 MPI_*_init or Open MPI's MPIX_*_init)"
#endif

int allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return create(pmpi::coll::allreduce, sendbuf, recvbuf, count, datatype, op, 0, comm, request, [&] {
    return COLLC_PMPI_LIBRARY_INIT(Allreduce)(sendbuf, recvbuf, count, datatype, op, comm, info, request);
  });
}

int bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
               MPI_Request* request) {
  return create(pmpi::coll::bcast, buffer, buffer, count, datatype, MPI_OP_NULL, root, comm, request,
                [&] { return COLLC_PMPI_LIBRARY_INIT(Bcast)(buffer, count, datatype, root, comm, info, request); });
}

int reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return create(pmpi::coll::reduce, sendbuf, recvbuf, count, datatype, op, root, comm, request, [&] {
    return COLLC_PMPI_LIBRARY_INIT(Reduce)(sendbuf, recvbuf, count, datatype, op, root, comm, info, request);
  });
}

int allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  const auto library = [&] {
    return COLLC_PMPI_LIBRARY_INIT(Allgather)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                                              request);
  };
  return create(pmpi::coll::allgather, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm, request, library,
                sendcount, sendtype);
}

int reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return create(pmpi::coll::reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype, op, 0, comm, request, [&] {
    return COLLC_PMPI_LIBRARY_INIT(Reduce_scatter_block)(sendbuf, recvbuf, recvcount, datatype, op, comm, info,
                                                         request);
  });
}

}  // namespace

// --- creation: the MPI 4.0 names, and Open MPI 4.1's MPIX_ names -----------------------
//
// Open MPI 4.1's libmpi has no MPI_*_init, but a program built against an
// MPI-4 header may call them: with the library preloaded they work.

COLLC_PMPI_EXPORT int MPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                                         MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

COLLC_PMPI_EXPORT int MPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                                     MPI_Info info, MPI_Request* request) {
  return bcast_init(buffer, count, datatype, root, comm, info, request);
}

COLLC_PMPI_EXPORT int MPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                      int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return reduce_init(sendbuf, recvbuf, count, datatype, op, root, comm, info, request);
}

COLLC_PMPI_EXPORT int MPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                         int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                         MPI_Request* request) {
  return allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info, request);
}

COLLC_PMPI_EXPORT int MPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount,
                                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                                    MPI_Request* request) {
  return reduce_scatter_block_init(sendbuf, recvbuf, recvcount, datatype, op, comm, info, request);
}

#if defined(OPEN_MPI) && defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
// Open MPI's spelling: the same functions under a second name.
#define COLLC_PMPI_MPIX_NAME(name) \
  COLLC_PMPI_EXPORT decltype(MPI_##name) MPIX_##name __attribute__((alias("MPI_" #name)));
COLLC_PMPI_MPIX_NAME(Allreduce_init)
COLLC_PMPI_MPIX_NAME(Bcast_init)
COLLC_PMPI_MPIX_NAME(Reduce_init)
COLLC_PMPI_MPIX_NAME(Allgather_init)
COLLC_PMPI_MPIX_NAME(Reduce_scatter_block_init)
#endif

// --- starting ---------------------------------------------------------------------------

COLLC_PMPI_EXPORT int MPI_Start(MPI_Request* request) {
  entry* e = request != nullptr ? find(*request) : nullptr;
  return e != nullptr ? start_one(*e, request) : PMPI_Start(request);
}

COLLC_PMPI_EXPORT int MPI_Startall(int count, MPI_Request array_of_requests[]) {
  if (none_live()) return PMPI_Startall(count, array_of_requests);
  std::vector<entry*> ours;
  if (find_all(count, array_of_requests, ours) == 0) return PMPI_Startall(count, array_of_requests);
  // In array order on every rank: collectives must start in the same order
  // everywhere (MPI 4.0, section 6.13), and MPI_Startall may choose any order
  // (section 3.9). Runs of the program's requests go to the library together.
  int first_err = MPI_SUCCESS;
  for (int i = 0; i < count;) {
    int err = MPI_SUCCESS;
    if (ours[static_cast<std::size_t>(i)] != nullptr) {
      err = start_one(*ours[static_cast<std::size_t>(i)], &array_of_requests[i]);
      ++i;
    } else {
      int j = i;
      while (j < count && ours[static_cast<std::size_t>(j)] == nullptr) ++j;
      err = PMPI_Startall(j - i, &array_of_requests[i]);
      i = j;
    }
    if (first_err == MPI_SUCCESS) first_err = err;
  }
  return first_err;
}

// --- single completion (MPI 4.0, section 3.7.3) ----------------------------------------------

COLLC_PMPI_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  entry* e = request != nullptr ? find(*request) : nullptr;
  // An inactive request completes at once with the empty status: the library's own stand-in does that.
  if (e == nullptr || !e->started) {
    // MPI's own request: while collc requests are started, its wait gives them turns (interpose.hpp).
    if (e == nullptr && pmpi::requests_started().load(std::memory_order_relaxed) > 0)
      return pmpi::wait_giving_turns(MPI_COMM_NULL, request, status);
    return PMPI_Wait(request, status);
  }
  while (!poll(*e)) idle();
  return finish(*e, request, status);
}

COLLC_PMPI_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  entry* e = request != nullptr ? find(*request) : nullptr;
  if (e == nullptr || !e->started) return PMPI_Test(request, flag, status);
  if (!poll(*e)) {
    turn_mpi();  // a test loop must progress the program's other messages too (see idle)
    *flag = 0;
    return MPI_SUCCESS;
  }
  *flag = 1;
  return finish(*e, request, status);
}

/// Like MPI_Test without completing the request (MPI 4.0, section 3.7.3):
/// the stand-in stays active, the plan stays done.
COLLC_PMPI_EXPORT int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  entry* e = find(request);
  if (e == nullptr || !e->started) return PMPI_Request_get_status(request, flag, status);
  if (!poll(*e)) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  const int err = PMPI_Request_get_status(request, flag, status);
  collective_status(status);
  return e->err != MPI_SUCCESS ? e->err : err;
}

// --- multiple completions (MPI 4.0, section 3.7.5) -----------------------------------------
//
// Mixed arrays never block inside a plan while the program's requests need the
// library's progress (or the other way round): each round polls collc's
// requests and tests the others, until the call's condition holds.

namespace {

/// The end of MPI_Waitall / MPI_Testall once every request is complete: the
/// program's own requests (done by the MPI library, `rest`) and their
/// statuses go back into the arrays, collc's are finished (an inactive one
/// gets the empty status of its inactive stand-in). One failure among
/// several: MPI_ERR_IN_STATUS when the statuses say which.
int complete_all(int count, MPI_Request requests[], MPI_Status statuses[], const std::vector<entry*>& ours,
                 others& rest, int rest_err) {
  rest.copy_back(requests);
  for (int j = 0; j < rest.size() && rest.want_status; ++j) statuses[rest.pos[j]] = rest.statuses[j];
  int result = rest_err;
  for (int i = 0; i < count; ++i) {
    entry* e = ours[static_cast<std::size_t>(i)];
    if (e == nullptr) continue;
    MPI_Status* st = status_at(statuses, i);
    const int err = e->started ? finish(*e, &requests[i], st) : PMPI_Wait(&requests[i], st);
    if (st != MPI_STATUS_IGNORE) st->MPI_ERROR = err;
    if (err != MPI_SUCCESS && result == MPI_SUCCESS) result = err;
  }
  if (result != MPI_SUCCESS && statuses != MPI_STATUSES_IGNORE) return MPI_ERR_IN_STATUS;
  return result;
}

}  // namespace

COLLC_PMPI_EXPORT int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]) {
  if (none_live()) return PMPI_Waitall(count, array_of_requests, array_of_statuses);
  std::vector<entry*> ours;
  if (find_all(count, array_of_requests, ours) == 0) return waitall_mpi(count, array_of_requests, array_of_statuses);
  others rest(count, array_of_requests, ours, array_of_statuses);
  int rest_err = MPI_SUCCESS;
  bool rest_done = rest.size() == 0;
  for (;;) {
    bool ours_done = true;
    for (entry* e : ours)
      if (e != nullptr && e->started && !poll(*e)) ours_done = false;
    if (ours_done) {
      // Nothing of collc's left to progress: the library may block for the rest.
      if (!rest_done) rest_err = waitall_mpi(rest.size(), rest.reqs.data(), rest.status_array());
      break;
    }
    if (!rest_done) {
      int flag = 0;
      rest_err = PMPI_Testall(rest.size(), rest.reqs.data(), &flag, rest.status_array());
      rest_done = flag != 0 || rest_err != MPI_SUCCESS;
      std::this_thread::yield();
    } else {
      idle();
    }
  }
  return complete_all(count, array_of_requests, array_of_statuses, ours, rest, rest_err);
}

COLLC_PMPI_EXPORT int MPI_Testall(int count, MPI_Request array_of_requests[], int* flag,
                                  MPI_Status array_of_statuses[]) {
  if (none_live()) return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
  std::vector<entry*> ours;
  if (find_all(count, array_of_requests, ours) == 0)
    return PMPI_Testall(count, array_of_requests, flag, array_of_statuses);
  bool ours_done = true;
  for (entry* e : ours)
    if (e != nullptr && e->started && !poll(*e)) ours_done = false;
  // MPI_Testall that returns false modifies no request (MPI 4.0, section
  // 3.7.5), so the others are tested only once collc's are all done; a plan
  // done meanwhile stays done (persistent_call::test says so again).
  if (!ours_done) {
    turn_mpi();
    *flag = 0;
    return MPI_SUCCESS;
  }
  others rest(count, array_of_requests, ours, array_of_statuses);
  int rest_err = MPI_SUCCESS;
  int rest_flag = 1;
  if (rest.size() > 0) rest_err = PMPI_Testall(rest.size(), rest.reqs.data(), &rest_flag, rest.status_array());
  if (rest_flag == 0 && rest_err == MPI_SUCCESS) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  *flag = 1;
  return complete_all(count, array_of_requests, array_of_statuses, ours, rest, rest_err);
}

namespace {

/// One round of MPI_Waitany / MPI_Testany on a mixed array: true when it
/// decided (a request completed, or none is active: *index = MPI_UNDEFINED).
bool any_round(int count, MPI_Request reqs[], const std::vector<entry*>& ours, others& rest, int* index,
               MPI_Status* status, int* err) {
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    entry* e = ours[static_cast<std::size_t>(i)];
    if (e == nullptr || !e->started) continue;
    any_active = true;
    if (poll(*e)) {
      *index = i;
      *err = finish(*e, &reqs[i], status);
      return true;
    }
  }
  if (rest.size() > 0) {
    int k = MPI_UNDEFINED;
    int flag = 0;
    *err = PMPI_Testany(rest.size(), rest.reqs.data(), &k, &flag, status);
    rest.copy_back(reqs);
    if (k != MPI_UNDEFINED && (flag != 0 || *err != MPI_SUCCESS)) {
      *index = rest.pos[static_cast<std::size_t>(k)];
      return true;
    }
    if (*err != MPI_SUCCESS) return true;
    if (flag == 0) any_active = true;  // flag set with MPI_UNDEFINED: none of the others is active
  }
  if (!any_active) {
    // No active request at all: MPI_UNDEFINED and the empty status.
    *index = MPI_UNDEFINED;
    empty_status(status);
    return true;
  }
  return false;
}

/// One round of MPI_Waitsome / MPI_Testsome on a mixed array: the completed
/// requests appended to indices/statuses; false when none is active.
bool some_round(int count, MPI_Request reqs[], const std::vector<entry*>& ours, others& rest, int* outcount,
                int indices[], MPI_Status statuses[], int* err) {
  int n = 0;
  bool any_active = false;
  bool failed = false;
  for (int i = 0; i < count; ++i) {
    entry* e = ours[static_cast<std::size_t>(i)];
    if (e == nullptr || !e->started) continue;
    any_active = true;
    if (poll(*e)) {
      MPI_Status* st = status_at(statuses, n);
      const int e_err = finish(*e, &reqs[i], st);
      if (st != MPI_STATUS_IGNORE) st->MPI_ERROR = e_err;
      if (e_err != MPI_SUCCESS) failed = true, *err = e_err;
      indices[n++] = i;
    }
  }
  if (rest.size() > 0) {
    int out = 0;
    std::vector<int> idx(static_cast<std::size_t>(rest.size()));
    const int r_err = PMPI_Testsome(rest.size(), rest.reqs.data(), &out, idx.data(), rest.status_array());
    rest.copy_back(reqs);
    if (out != MPI_UNDEFINED) {
      any_active = true;
      for (int j = 0; j < out; ++j) {
        if (rest.want_status) statuses[n] = rest.statuses[static_cast<std::size_t>(j)];
        indices[n++] = rest.pos[static_cast<std::size_t>(idx[static_cast<std::size_t>(j)])];
      }
    }
    if (r_err != MPI_SUCCESS) failed = true, *err = r_err;
  }
  *outcount = any_active ? n : MPI_UNDEFINED;
  if (failed && statuses != MPI_STATUSES_IGNORE) *err = MPI_ERR_IN_STATUS;
  return any_active;
}

}  // namespace

COLLC_PMPI_EXPORT int MPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status) {
  if (none_live()) return PMPI_Waitany(count, array_of_requests, index, status);
  std::vector<entry*> ours;
  if (find_all(count, array_of_requests, ours) == 0) return PMPI_Waitany(count, array_of_requests, index, status);
  others rest(count, array_of_requests, ours, MPI_STATUSES_IGNORE);
  for (;;) {
    int err = MPI_SUCCESS;
    if (any_round(count, array_of_requests, ours, rest, index, status, &err)) return err;
    if (rest.size() > 0)
      std::this_thread::yield();  // PMPI_Testany progressed the library
    else
      idle();
  }
}

COLLC_PMPI_EXPORT int MPI_Testany(int count, MPI_Request array_of_requests[], int* index, int* flag,
                                  MPI_Status* status) {
  if (none_live()) return PMPI_Testany(count, array_of_requests, index, flag, status);
  std::vector<entry*> ours;
  if (find_all(count, array_of_requests, ours) == 0) return PMPI_Testany(count, array_of_requests, index, flag, status);
  others rest(count, array_of_requests, ours, MPI_STATUSES_IGNORE);
  int err = MPI_SUCCESS;
  if (any_round(count, array_of_requests, ours, rest, index, status, &err)) {
    *flag = 1;  // also when no request was active (MPI 4.0, section 3.7.5)
    return err;
  }
  *flag = 0;
  *index = MPI_UNDEFINED;
  return MPI_SUCCESS;
}

COLLC_PMPI_EXPORT int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                                   MPI_Status array_of_statuses[]) {
  if (none_live()) return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
  std::vector<entry*> ours;
  if (find_all(incount, array_of_requests, ours) == 0)
    return PMPI_Waitsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
  others rest(incount, array_of_requests, ours, array_of_statuses);
  for (;;) {
    int err = MPI_SUCCESS;
    if (!some_round(incount, array_of_requests, ours, rest, outcount, array_of_indices, array_of_statuses, &err) ||
        *outcount > 0 || err != MPI_SUCCESS)
      return err;
    if (rest.size() > 0)
      std::this_thread::yield();
    else
      idle();
  }
}

COLLC_PMPI_EXPORT int MPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                                   MPI_Status array_of_statuses[]) {
  if (none_live()) return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
  std::vector<entry*> ours;
  if (find_all(incount, array_of_requests, ours) == 0)
    return PMPI_Testsome(incount, array_of_requests, outcount, array_of_indices, array_of_statuses);
  others rest(incount, array_of_requests, ours, array_of_statuses);
  int err = MPI_SUCCESS;
  some_round(incount, array_of_requests, ours, rest, outcount, array_of_indices, array_of_statuses, &err);
  return err;
}

// --- freeing and cancelling ----------------------------------------------------------------

COLLC_PMPI_EXPORT int MPI_Request_free(MPI_Request* request) {
  entry* e = request != nullptr ? find(*request) : nullptr;
  if (e == nullptr) return PMPI_Request_free(request);
  // MPI 4.0, sections 6.12 and 6.13: freeing a collective's request while it
  // is active is erroneous (there would be no way to know when its buffers
  // are free again); an inactive persistent one may be freed.
  if (e->started)
    return refuse(*e, "MPI_Request_free", "the request is active (complete it with MPI_Wait or MPI_Test first)");
  std::unique_ptr<entry> gone;
  {
    auto& t = table();
    const std::lock_guard<std::mutex> lock(t.m);
    const key_type k = key_of(*request);
    auto it = t.by_handle.find(k);
    gone = std::move(it->second);
    t.by_handle.erase(it);
    g_filter[slot_of(k)].fetch_sub(1, std::memory_order_relaxed);
    // The stand-in (inactive) is kept for the next request, never freed (see
    // request_table::spare); the entry goes before another request can take it.
    t.spare.push_back(*request);
  }
  g_live.fetch_sub(1, std::memory_order_relaxed);
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

COLLC_PMPI_EXPORT int MPI_Cancel(MPI_Request* request) {
  entry* e = request != nullptr ? find(*request) : nullptr;
  if (e == nullptr) return PMPI_Cancel(request);
  // MPI 4.0, section 6.12: cancelling a collective's request is erroneous.
  return refuse(*e, "MPI_Cancel", "a collective cannot be cancelled (complete it with MPI_Wait or MPI_Test)");
}
