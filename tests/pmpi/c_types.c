/* Every datatype and operator libcollc_mpi reduces, and bcast/allgather
 * between ranks that lay the same ints out differently, each result checked
 * against a reference every rank computes locally from the seeded data of all
 * ranks (no MPI call in the reference): a bounded, fixed-seed regression test
 * that lists its coverage instead of drawing it.
 *
 * Reductions: for every predefined datatype in collc's table (src/pmpi/core.cpp:
 * C and Fortran integers of every width, MPI_AINT/OFFSET/COUNT, float, double,
 * long double, REAL*, complex of every kind, C/C++ bool and LOGICAL, MPI_BYTE,
 * the nine MINLOC/MAXLOC pair types) and every operator MPI 4.0 (6.9.2) allows
 * on it (and the logical ones on MPI_AINT/OFFSET/COUNT, which MPI leaves
 * undefined and both libraries take as on C integers), plus user operators (a commutative sum; "first nonzero", an
 * associative operator that is not commutative, on every type; concatenation
 * of digit strings on MPI_UINT64_T and composition of affine maps on
 * MPI_2INT, whose results spell out the rank order), `calls_per_pair` calls
 * each. A call draws its collective (allreduce, reduce, reduce_scatter_block,
 * reduce_scatter with equal or, a quarter of the time, unequal counts), form
 * (blocking, MPI_I* nonblocking, persistent restarted with fresh data), count
 * (1 to a few hundred, sometimes 16-80 KiB), root, MPI_IN_PLACE and
 * communicator (the world, a duplicate, a split in reversed order, the world
 * permuted, MPI_COMM_SELF). The result must equal the reference element for
 * element, and no byte before or after the receive buffer (nor the receive
 * buffer of a non-root in reduce) may change.
 *
 * Bcast/allgather: every rank has a datatype of its own for the same ints,
 * cycling through 12 layouts (plain, contiguous, strided vector, resized with
 * a gap, resized with a negative lower bound, a struct and an indexed type
 * with their blocks reversed, MPI_BOTTOM with absolute addresses, a dup of a
 * contiguous type, a leading gap, a contiguous type of vectors, a negative
 * stride); every byte of the receive and send regions, gaps included, must
 * equal the image computed locally.
 *
 * The MPI libraries' own bugs (reproduced without collc) are steered around,
 * so the plain run of compare.sh passes too:
 * - Open MPI 4.1.4 gets MIN/MAX of unsigned types and of MPI_OFFSET wrong (its
 *   issue 10648), and its AVX operators saturate an overflowing sum of small
 *   integers (its issue 8045). So integers that wrap, unsigned values with
 *   the top bit set and negative offsets ("wild" data) are drawn only where
 *   collc takes the call: libcollc_mpi preloaded with compare.sh's knobs
 *   (COLLC_PMPI_FROM_CALL=1, COLLC_PMPI_SIZES=all), a blocking or persistent
 *   call with equal counts. Elsewhere the data are "tame" (no overflow, no top
 *   bit), and every reduction is exact in any order, as MPI may reorder.
 * - Open MPI refuses predefined operators on derived types: reductions use
 *   predefined types only (derived ones go to MPI anyway, docs/pmpi.md).
 * - MPICH 4.0.2 aborts in two of the layouts (the dup of a contiguous type,
 *   the contiguous type of vectors), in MPI_Reduce with MPI_IN_PLACE at a root
 *   other than 0 (above about 2 KiB), and in (persistent)
 *   reduce_scatter_block with a user operator on a pair type with padding,
 *   and in a persistent allgather of derived types: under MPICH those
 *   layouts are left out, an in-place reduce has root 0, such a
 *   reduce_scatter_block is an allreduce, and allgather is not persistent.
 *
 * Rank 0 prints the coverage (the same lines with and without the library,
 * for compare.sh) and "ok" or "FAILED"; each wrong result is reported on
 * stderr with the call, the datatype, the operator and both values; the exit
 * status is 1 on failure. With C_TYPES_TRACE set, each rank names every call
 * on stderr before making it (to find the call an MPI library crashes in).
 *   c_types [seed] [calls_per_pair] [move_calls]   (defaults 1 2 144) */
#include <mpi.h>

#include "c_persistent_names.h"
#include "c_shared.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64's finaliser: data are a function of (seed, call, rank, index), so
 * any rank can compute any other rank's. */
static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static uint64_t params_state; /* the same on every rank: every call's parameters */
static int pick(int n) { return (int)((params_state = mix(params_state)) % (uint64_t)n); }
static uint64_t seed;

/* ---- datatypes -------------------------------------------------------------- */

enum cls { C_INT, C_FINT, C_FLT, C_CPX, C_LOG, C_BYTE, C_PAIR };
enum pv { V_FLOAT, V_DOUBLE, V_LONG, V_INT, V_SHORT, V_LDOUBLE }; /* a pair's value and index kinds */
typedef struct {
  const char* name;
  MPI_Datatype t;
  int cls, w, sgn; /* w: integer/logical bytes, float bytes (16: long double), complex part bytes */
  size_t ext;
  int pv, iv; /* pairs: value kind, index kind (V_INT, V_FLOAT, V_DOUBLE) */
  size_t ioff;
  int usable;  /* the handle exists in this MPI with the size and extent above */
  size_t size; /* MPI_Type_size (less than ext for pairs with padding) */
} tdesc;

typedef struct {
  float v;
  int i;
} p_fi;
typedef struct {
  double v;
  int i;
} p_di;
typedef struct {
  long v;
  int i;
} p_li;
typedef struct {
  int v;
  int i;
} p_ii;
typedef struct {
  short v;
  int i;
} p_si;
typedef struct {
  long double v;
  int i;
} p_ldi;
typedef struct {
  float v, i;
} p_rr;
typedef struct {
  double v, i;
} p_dd;

static tdesc T[64];
static int NT;
static void addt(const char* n, MPI_Datatype t, int cls, int w, int sgn, size_t ext, int pv, int iv, size_t ioff) {
  T[NT++] = (tdesc){n, t, cls, w, sgn, ext, pv, iv, ioff, 0, 0};
}
static void init_types(void) {
#define IN(t, w, s) addt(#t, t, C_INT, w, s, w, 0, 0, 0)
  IN(MPI_SIGNED_CHAR, 1, 1);
  IN(MPI_UNSIGNED_CHAR, 1, 0);
  IN(MPI_SHORT, 2, 1);
  IN(MPI_UNSIGNED_SHORT, 2, 0);
  IN(MPI_INT, 4, 1);
  IN(MPI_UNSIGNED, 4, 0);
  IN(MPI_LONG, sizeof(long), 1);
  IN(MPI_UNSIGNED_LONG, sizeof(long), 0);
  IN(MPI_LONG_LONG, 8, 1);
  IN(MPI_UNSIGNED_LONG_LONG, 8, 0);
  IN(MPI_INT8_T, 1, 1);
  IN(MPI_INT16_T, 2, 1);
  IN(MPI_INT32_T, 4, 1);
  IN(MPI_INT64_T, 8, 1);
  IN(MPI_UINT8_T, 1, 0);
  IN(MPI_UINT16_T, 2, 0);
  IN(MPI_UINT32_T, 4, 0);
  IN(MPI_UINT64_T, 8, 0);
  IN(MPI_AINT, sizeof(MPI_Aint), 1);
  IN(MPI_OFFSET, sizeof(MPI_Offset), 1);
  IN(MPI_COUNT, sizeof(MPI_Count), 1);
#define FI(t, w) addt(#t, t, C_FINT, w, 1, w, 0, 0, 0)
  FI(MPI_INTEGER, 4);
  FI(MPI_INTEGER1, 1);
  FI(MPI_INTEGER2, 2);
  FI(MPI_INTEGER4, 4);
  FI(MPI_INTEGER8, 8);
#define FL(t, w) addt(#t, t, C_FLT, w, 1, w, 0, 0, 0)
  FL(MPI_FLOAT, 4);
  FL(MPI_DOUBLE, 8);
  FL(MPI_LONG_DOUBLE, sizeof(long double));
  FL(MPI_REAL, 4);
  FL(MPI_DOUBLE_PRECISION, 8);
  FL(MPI_REAL4, 4);
  FL(MPI_REAL8, 8);
#define CX(t, w) addt(#t, t, C_CPX, w, 1, 2 * (w), 0, 0, 0)
  CX(MPI_C_FLOAT_COMPLEX, 4);
  CX(MPI_C_DOUBLE_COMPLEX, 8);
  CX(MPI_C_LONG_DOUBLE_COMPLEX, sizeof(long double));
  CX(MPI_CXX_FLOAT_COMPLEX, 4);
  CX(MPI_CXX_DOUBLE_COMPLEX, 8);
  CX(MPI_CXX_LONG_DOUBLE_COMPLEX, sizeof(long double));
  CX(MPI_COMPLEX, 4);
  CX(MPI_DOUBLE_COMPLEX, 8);
  CX(MPI_COMPLEX8, 4);
  CX(MPI_COMPLEX16, 8);
  addt("MPI_C_BOOL", MPI_C_BOOL, C_LOG, 1, 0, 1, 0, 0, 0);
  addt("MPI_CXX_BOOL", MPI_CXX_BOOL, C_LOG, 1, 0, 1, 0, 0, 0);
  addt("MPI_LOGICAL", MPI_LOGICAL, C_LOG, 4, 0, 4, 0, 0, 0); /* gfortran's default LOGICAL: 4 bytes, .true. = 1 */
  addt("MPI_BYTE", MPI_BYTE, C_BYTE, 1, 0, 1, 0, 0, 0);
#define PR(t, st, pv, iv) addt(#t, t, C_PAIR, 0, 0, sizeof(st), pv, iv, offsetof(st, i))
  PR(MPI_FLOAT_INT, p_fi, V_FLOAT, V_INT);
  PR(MPI_DOUBLE_INT, p_di, V_DOUBLE, V_INT);
  PR(MPI_LONG_INT, p_li, V_LONG, V_INT);
  PR(MPI_2INT, p_ii, V_INT, V_INT);
  PR(MPI_SHORT_INT, p_si, V_SHORT, V_INT);
  PR(MPI_LONG_DOUBLE_INT, p_ldi, V_LDOUBLE, V_INT);
  PR(MPI_2REAL, p_rr, V_FLOAT, V_FLOAT);
  PR(MPI_2DOUBLE_PRECISION, p_dd, V_DOUBLE, V_DOUBLE);
  PR(MPI_2INTEGER, p_ii, V_INT, V_INT);
  /* A handle this MPI lacks (no Fortran bindings: MPI_DATATYPE_NULL) or whose
   * size or extent differs from the C layout above is left out, and said so. */
  for (int i = 0; i < NT; ++i) {
    int size = 0;
    MPI_Aint lb = 0, extent = 0;
    if (T[i].t == MPI_DATATYPE_NULL || MPI_Type_size(T[i].t, &size) != MPI_SUCCESS ||
        MPI_Type_get_extent(T[i].t, &lb, &extent) != MPI_SUCCESS)
      continue;
    const size_t data = T[i].cls == C_PAIR ? (size_t)size : T[i].ext;
    T[i].size = (size_t)size;
    T[i].usable = lb == 0 && (size_t)extent == T[i].ext && (size_t)size == data;
  }
}

/* ---- operators --------------------------------------------------------------- */

enum {
  SUM,
  PROD,
  MIN,
  MAX,
  BAND,
  BOR,
  BXOR,
  LAND,
  LOR,
  LXOR,
  MINLOC,
  MAXLOC,
  U_SUM,
  U_FIRSTNZ,
  U_CONCAT,
  U_AFFINE,
  NOPS
};
static const char* opn[] = {"sum",
                            "prod",
                            "min",
                            "max",
                            "band",
                            "bor",
                            "bxor",
                            "land",
                            "lor",
                            "lxor",
                            "minloc",
                            "maxloc",
                            "user sum (commutative)",
                            "user first-nonzero (not commutative)",
                            "user concatenation (not commutative)",
                            "user affine composition (not commutative)"};
static MPI_Op mop[NOPS];

/* Which operators each type takes (MPI 4.0, 6.9.2; user ones: ours). */
static int valid(const tdesc* d, int op) {
  switch (op) {
    case U_SUM: return d->cls != C_LOG && d->cls != C_BYTE;
    case U_FIRSTNZ: return 1;
    case U_CONCAT: return d->t == MPI_UINT64_T;
    case U_AFFINE: return d->t == MPI_2INT;
  }
  switch (d->cls) {
    case C_INT: return op <= LXOR;
    case C_FINT: return op <= BXOR;
    case C_FLT: return op <= MAX;
    case C_CPX: return op <= PROD;
    case C_LOG: return op >= LAND && op <= LXOR;
    case C_BYTE: return op >= BAND && op <= BXOR;
    case C_PAIR: return op == MINLOC || op == MAXLOC;
  }
  return 0;
}

/* ---- element access ------------------------------------------------------------ */

static long double getf(const void* p, int w) {
  if (w == 4) return *(const float*)p;
  if (w == 8) return *(const double*)p;
  return *(const long double*)p;
}
static void setf(void* p, int w, long double v) {
  if (w == 4)
    *(float*)p = (float)v;
  else if (w == 8)
    *(double*)p = (double)v;
  else
    *(long double*)p = v;
}
static uint64_t getu(const void* p, int w) {
  uint64_t u = 0;
  memcpy(&u, p, (size_t)w);
  return u;
}
static int64_t gets(const void* p, int w) {
  const uint64_t u = getu(p, w);
  if (w < 8) {
    const int sh = 64 - 8 * w;
    return (int64_t)(u << sh) >> sh;
  }
  return (int64_t)u;
}
static void setu(void* p, int w, uint64_t u) { memcpy(p, &u, (size_t)w); }
static long double pget_v(const tdesc* d, const void* p) {
  switch (d->pv) {
    case V_FLOAT: return *(const float*)p;
    case V_DOUBLE: return *(const double*)p;
    case V_LONG: return *(const long*)p;
    case V_INT: return *(const int*)p;
    case V_SHORT: return *(const short*)p;
    default: return *(const long double*)p;
  }
}
static void pset_v(const tdesc* d, void* p, long double v) {
  switch (d->pv) {
    case V_FLOAT: *(float*)p = (float)v; break;
    case V_DOUBLE: *(double*)p = (double)v; break;
    case V_LONG: *(long*)p = (long)v; break;
    case V_INT: *(int*)p = (int)v; break;
    case V_SHORT: *(short*)p = (short)v; break;
    default: *(long double*)p = v;
  }
}
static long double pget_i(const tdesc* d, const void* p) {
  const char* q = (const char*)p + d->ioff;
  if (d->iv == V_FLOAT) return *(const float*)q;
  if (d->iv == V_DOUBLE) return *(const double*)q;
  return *(const int*)q;
}
static void pset_i(const tdesc* d, void* p, long double v) {
  char* q = (char*)p + d->ioff;
  if (d->iv == V_FLOAT)
    *(float*)q = (float)v;
  else if (d->iv == V_DOUBLE)
    *(double*)q = (double)v;
  else
    *(int*)q = (int)v;
}
/* The bytes of a pair MPI defines (the value and the index, not the padding). */
static size_t pair_data_end(const tdesc* d) { return d->ioff + (d->iv == V_DOUBLE ? 8 : 4); }

/* ---- user operators ------------------------------------------------------------ */

static int wrank, failures;
static const tdesc* find_desc(MPI_Datatype t) {
  for (int i = 0; i < NT; ++i)
    if (T[i].t == t) return &T[i];
  if (failures++ < 20) fprintf(stderr, "c_types: rank %d: a user operator was given a datatype no call used\n", wrank);
  return NULL;
}
static int is_zero(const tdesc* d, const char* p) {
  switch (d->cls) {
    case C_FLT: return getf(p, d->w) == 0;
    case C_CPX: return getf(p, d->w) == 0 && getf(p + d->w, d->w) == 0;
    case C_PAIR: return pget_v(d, p) == 0;
    default: return getu(p, d->w) == 0;
  }
}
static void add_elem(const tdesc* d, char* a, const char* b) { /* a += b */
  switch (d->cls) {
    case C_FLT: setf(a, d->w, getf(a, d->w) + getf(b, d->w)); break;
    case C_CPX:
      setf(a, d->w, getf(a, d->w) + getf(b, d->w));
      setf(a + d->w, d->w, getf(a + d->w, d->w) + getf(b + d->w, d->w));
      break;
    case C_PAIR:
      pset_v(d, a, pget_v(d, a) + pget_v(d, b));
      pset_i(d, a, pget_i(d, a) + pget_i(d, b));
      break;
    default: setu(a, d->w, getu(a, d->w) + getu(b, d->w));
  }
}
static void u_sum(void* in, void* io, int* len, MPI_Datatype* t) {
  const tdesc* d = find_desc(*t);
  if (d)
    for (int k = 0; k < *len; ++k) add_elem(d, (char*)io + k * d->ext, (const char*)in + k * d->ext);
}
/* in op io = in if in != 0, else io: associative, not commutative (the
 * lowest rank's nonzero wins). Copies the defined bytes only: MPI's buffers
 * may end at a pair's true extent. */
static void u_firstnz(void* in, void* io, int* len, MPI_Datatype* t) {
  const tdesc* d = find_desc(*t);
  if (d)
    for (int k = 0; k < *len; ++k)
      if (!is_zero(d, (const char*)in + k * d->ext))
        memcpy((char*)io + k * d->ext, (const char*)in + k * d->ext, d->cls == C_PAIR ? pair_data_end(d) : d->ext);
}
/* uint64: the top 8 bits a length, below them that many base-8 digits:
 * in op io = the digits of in, then those of io. */
static void u_concat(void* in, void* io, int* len, MPI_Datatype* t) {
  (void)t;
  const uint64_t* a = in;
  uint64_t* b = io;
  const uint64_t low = (1ull << 56) - 1;
  for (int k = 0; k < *len; ++k) {
    const uint64_t la = a[k] >> 56, lb = b[k] >> 56;
    b[k] = ((la + lb) << 56) | ((((a[k] & low) << (3 * lb)) | (b[k] & low)) & low);
  }
}

/* ---- data ------------------------------------------------------------------------ */

/* Element j of world rank r's input to call `key`, for a communicator of P
 * ranks. Tame data reduce exactly and without overflow in any order on up to
 * 6 ranks, with no unsigned top bit and no negative MPI_OFFSET; wild data
 * (only where collc takes the call) are any bits. */
static void gen(const tdesc* d, int op, uint64_t key, int r, size_t j, int wild, int P, char* p) {
  uint64_t h = mix(seed ^ mix((key << 20) ^ ((uint64_t)r << 52) ^ mix(j)));
  memset(p, 0, d->ext);
  const int zero = op == U_FIRSTNZ && (h & 3) != 0; /* mostly zeros: the rank order decides */
  h = mix(h);
  if (zero) return;
  if (op == U_CONCAT) {
    const uint64_t l = 1 + h % 3;
    setu(p, 8, (l << 56) | ((h >> 8) & ((1ull << (3 * l)) - 1)));
    return;
  }
  if (op == U_AFFINE) {
    ((int*)p)[0] = 1 + (int)(h % (MOD - 1));
    ((int*)p)[1] = (int)((h >> 32) % MOD);
    return;
  }
  const int s = (int)(h % 32) - 16; /* a small signed value */
  switch (d->cls) {
    case C_INT:
    case C_FINT: {
      const int w = d->w;
      const uint64_t mask = w == 8 ? ~0ull : (1ull << (8 * w)) - 1;
      uint64_t v;
      if (op == LAND || op == LOR || op == LXOR) {
        static const uint64_t nz[] = {1, 2, 0x80, 0x100, 0x8000, 0x10000, 1ull << 31, 1ull << 32, 1ull << 63};
        const int lim = w == 1 ? 3 : w == 2 ? 5 : w == 4 ? 7 : 9;
        v = (h & 1) ? nz[(h >> 1) % lim] : 0;
      } else if (wild || op == BAND || op == BOR || op == BXOR) {
        v = h >> 1; /* any bits, the top ones too */
        if (h & 1) v |= 1ull << 63;
      } else if (op == SUM || op == U_SUM) {
        v = d->sgn ? (uint64_t)(int64_t)s : (uint64_t)(s + 16);
      } else if (op == PROD) {
        static const int sv[] = {1, -1, 2, -2}, uv[] = {1, 2, 1, 3};
        v = d->sgn ? (uint64_t)(int64_t)(P <= 6 ? sv[h % 4] : sv[h % 2]) : (uint64_t)(P <= 5 ? uv[h % 4] : uv[h % 2]);
      } else { /* min, max, first-nonzero: any value of the type, no top bit where unsigned or MPI_OFFSET */
        v = h >> 1;
        if (d->sgn && d->t != MPI_OFFSET && (h & 1)) v = ~v;
        if (!(d->sgn && d->t != MPI_OFFSET)) v &= mask >> 1;
      }
      setu(p, w, v & mask);
      break;
    }
    case C_FLT: {
      static const long double pv[] = {1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5};
      long double v;
      if (op == PROD)
        v = pv[h % 8];
      else if (op == SUM || op == U_SUM)
        v = s * 0.25L;
      else
        v = ((long double)(int64_t)(h % 2000001) - 1000000) / 64; /* exact in float: 21 bits */
      setf(p, d->w, v);
      break;
    }
    case C_CPX: {
      /* Small integers: every product of up to 6 ranks' is exact. */
      static const int re[] = {1, -1, 2, -2};
      const int im = (int)((h >> 8) % 3) - 1;
      setf(p, d->w, op == PROD ? re[h % 4] : s);
      setf(p + d->w, d->w, op == PROD ? im : (int)((h >> 16) % 32) - 16);
      break;
    }
    case C_LOG: setu(p, d->w, h & 1); break;
    case C_BYTE: setu(p, 1, h & 0xff); break;
    case C_PAIR: {
      /* Values of few kinds, so ties (the smaller index wins) are common. */
      pset_v(d, p, (long double)((int)(h % 4) - 1));
      pset_i(d, p, (long double)((h >> 8) % 16));
      break;
    }
  }
}

/* a = a op b (a: the lower ranks', b: the next rank's). */
static void combine(const tdesc* d, int op, char* a, const char* b) {
  if (op >= U_SUM) {
    _Alignas(max_align_t) char tmp[64]; /* read as long double by the operators */
    memcpy(tmp, b, d->ext);
    int one = 1;
    MPI_Datatype t = d->t;
    if (op == U_SUM)
      u_sum(a, tmp, &one, &t);
    else if (op == U_FIRSTNZ)
      u_firstnz(a, tmp, &one, &t);
    else if (op == U_CONCAT)
      u_concat(a, tmp, &one, &t);
    else
      compose(a, tmp, &one, &t);
    memcpy(a, tmp, d->ext);
    return;
  }
  switch (d->cls) {
    case C_INT:
    case C_FINT:
    case C_LOG:
    case C_BYTE: {
      const int w = d->w;
      const uint64_t x = getu(a, w), y = getu(b, w);
      const int64_t sx = gets(a, w), sy = gets(b, w);
      uint64_t r = 0;
      switch (op) {
        case SUM: r = x + y; break;
        case PROD: r = x * y; break;
        case MIN: r = d->sgn ? (sx < sy ? x : y) : (x < y ? x : y); break;
        case MAX: r = d->sgn ? (sx > sy ? x : y) : (x > y ? x : y); break;
        case BAND: r = x & y; break;
        case BOR: r = x | y; break;
        case BXOR: r = x ^ y; break;
        case LAND: r = x != 0 && y != 0; break;
        case LOR: r = x != 0 || y != 0; break;
        case LXOR: r = (x != 0) != (y != 0); break;
      }
      setu(a, w, r);
      break;
    }
    case C_FLT: {
      const long double x = getf(a, d->w), y = getf(b, d->w);
      setf(a, d->w, op == SUM ? x + y : op == PROD ? x * y : op == MIN ? (x < y ? x : y) : (x > y ? x : y));
      break;
    }
    case C_CPX: {
      const long double xr = getf(a, d->w), xi = getf(a + d->w, d->w), yr = getf(b, d->w), yi = getf(b + d->w, d->w);
      setf(a, d->w, op == SUM ? xr + yr : xr * yr - xi * yi);
      setf(a + d->w, d->w, op == SUM ? xi + yi : xr * yi + xi * yr);
      break;
    }
    case C_PAIR: {
      const long double xv = pget_v(d, a), yv = pget_v(d, b), xi = pget_i(d, a), yi = pget_i(d, b);
      if (op == MINLOC ? yv < xv : yv > xv) {
        pset_v(d, a, yv);
        pset_i(d, a, yi);
      } else if (xv == yv && yi < xi) {
        pset_i(d, a, yi); /* a tie: the smaller index */
      }
      break;
    }
  }
}

/* Element a differs from b (values compared: not padding, not the sign of a zero). */
static int differ(const tdesc* d, const char* a, const char* b) {
  switch (d->cls) {
    case C_FLT: return getf(a, d->w) != getf(b, d->w);
    case C_CPX: return getf(a, d->w) != getf(b, d->w) || getf(a + d->w, d->w) != getf(b + d->w, d->w);
    case C_PAIR: return pget_v(d, a) != pget_v(d, b) || pget_i(d, a) != pget_i(d, b);
    default: return getu(a, d->w) != getu(b, d->w);
  }
}

/* ---- communicators ------------------------------------------------------------------ */

typedef struct {
  MPI_Comm c;
  const char* name;
  int rank, size;
  int* world; /* the world rank of each rank */
} commx;
static void describe(commx* x, MPI_Comm c, const char* name) {
  x->c = c;
  x->name = name;
  MPI_Comm_rank(c, &x->rank);
  MPI_Comm_size(c, &x->size);
  MPI_Group g, wg;
  MPI_Comm_group(c, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &wg);
  int* r = malloc(sizeof(int) * (size_t)x->size);
  x->world = malloc(sizeof(int) * (size_t)x->size);
  for (int i = 0; i < x->size; ++i) r[i] = i;
  MPI_Group_translate_ranks(g, x->size, r, wg, x->world);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  free(r);
}
enum { NC = 5 };
static commx cx[NC];
static void make_comms(int wsize) {
  MPI_Comm c;
  describe(&cx[0], MPI_COMM_WORLD, "MPI_COMM_WORLD");
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  describe(&cx[1], c, "a duplicate");
  MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wsize - wrank, &c);
  describe(&cx[2], c, "a split by parity, reversed");
  MPI_Comm_split(MPI_COMM_WORLD, 0, (wrank * 3) % wsize * 100 + wrank, &c);
  describe(&cx[3], c, "the world permuted");
  describe(&cx[4], MPI_COMM_SELF, "MPI_COMM_SELF");
}

/* ---- reductions ----------------------------------------------------------------------- */

#define GUARD 64
#define SENT 0xA5
static int lib_takes; /* libcollc_mpi is preloaded with compare.sh's knobs: collc takes every call it can */
static int trace;     /* C_TYPES_TRACE set: each call named on stderr before it is made (to find a crash) */

static void report(const char* call, const char* what) {
  if (failures++ < 20) fprintf(stderr, "c_types: rank %d: %s: %s\n", wrank, call, what);
}
static void check_guard(const char* call, const char* what, const unsigned char* p, size_t n) {
  for (size_t j = 0; j < n; ++j)
    if (p[j] != SENT) {
      char m[160];
      snprintf(m, sizeof m, "%s: byte %zu of %zu changed to %02x", what, j, n, p[j]);
      report(call, m);
      return;
    }
}
static void check_result(const char* call, const tdesc* d, const char* got, const char* exp, size_t n) {
  for (size_t j = 0; j < n; ++j)
    if (differ(d, got + j * d->ext, exp + j * d->ext)) {
      char m[400];
      int k = snprintf(m, sizeof m, "element %zu of %zu differs: got", j, n);
      const size_t show = d->ext < 32 ? d->ext : 32;
      for (size_t b = 0; b < show && k < 300; ++b)
        k += snprintf(m + k, sizeof m - k, " %02x", (unsigned char)got[j * d->ext + b]);
      k += snprintf(m + k, sizeof m - k, ", expected");
      for (size_t b = 0; b < show && k < 390; ++b)
        k += snprintf(m + k, sizeof m - k, " %02x", (unsigned char)exp[j * d->ext + b]);
      report(call, m);
      return;
    }
}

/* The count: mostly small, some a few hundred, some 16-80 KiB (several of
 * collc's chunks and a tail). */
static int draw_count(size_t ext) {
  const int k = pick(20);
  if (k < 13) return 1 + pick(17);
  if (k < 19) return 18 + pick(600);
  return (int)(((size_t)16384 * (1 + pick(5))) / ext) + pick(7) - 3;
}

static int nchecks, ncalls[4][3];

/* Completes a call begun in `form` (0 blocking, 1 nonblocking: *req, 2
 * persistent: preq, started here) whose start returned `err`; 0 after an
 * error, which it reports. */
static int complete(const char* call, int form, int err, MPI_Request* req, MPI_Request preq) {
  if (form == 2) {
    *req = preq;
    if (err == MPI_SUCCESS) err = MPI_Start(req);
  }
  if (err != MPI_SUCCESS) {
    char m[64];
    snprintf(m, sizeof m, "returned error %d", err);
    report(call, m);
    return 0;
  }
  MPI_Wait(req, MPI_STATUS_IGNORE);
  ++nchecks;
  return 1;
}
static const char* colln[] = {"allreduce", "reduce", "reduce_scatter_block", "reduce_scatter"};
static const char* formn[] = {"", " (nonblocking)", " (persistent)"};

/* One call of collective `coll` (0-3) in form `form` (0 blocking, 1
 * nonblocking, 2 persistent, started `reps` times with fresh data). */
static void reduction(uint64_t key, const tdesc* d, int op) {
  commx* x = &cx[pick(NC)];
  int coll = pick(4);
  int form = pick(20);
  form = form < 9 ? 0 : form < 14 ? 1 : 2;
  if (coll == 3 && form == 2) form = 0; /* no persistent reduce_scatter in Open MPI 4.1 */
#if defined(MPICH_VERSION)
  /* MPICH 4.0.2 corrupts its heap in reduce_scatter_block (blocking or
   * persistent) with a user operator on a pair type with padding (without
   * collc too): an allreduce instead. */
  if (coll >= 2 && op >= U_SUM && d->size != d->ext) coll = 0;
#endif
  int root = pick(64) % x->size;
  const int inplace = pick(3) == 0, reps = form == 2 ? 1 + pick(2) : 1;
#if defined(MPICH_VERSION)
  /* MPICH 4.0.2 crashes (a memcpy from address -1) in MPI_Reduce with
   * MPI_IN_PLACE at a root other than 0 above about 2 KiB, without collc too. */
  if (coll == 1 && inplace) root = 0;
#endif
  const int unequal = coll == 3 && pick(4) == 0; /* unequal counts: MPI's call */
  const int n = draw_count(d->ext * (coll >= 2 ? (size_t)x->size : 1));
  int counts[64];
  for (int r = 0; r < 64; ++r) {
    const int v = pick(1 << 20);
    counts[r] = unequal ? v % (n + 2) : n;
  }
  /* Wild data only where collc takes the call (see the top). */
  const int wild = lib_takes && form != 1 && !unequal;
  size_t total = coll >= 2 ? (size_t)n * x->size : (size_t)n, base = coll >= 2 ? (size_t)n * x->rank : 0;
  size_t mine = (size_t)n; /* this rank's result elements */
  if (unequal) {
    total = base = 0;
    for (int r = 0; r < x->size; ++r) {
      total += counts[r];
      if (r < x->rank) base += counts[r];
    }
    mine = counts[x->rank];
  }
  const int ip = inplace && (coll != 1 || x->rank == root); /* MPI_IN_PLACE is the root's alone in reduce */
  const size_t rcount = ip && coll >= 2 ? total : mine;
  char* sbuf = malloc(total * d->ext + 1);
  char* rmem = malloc(rcount * d->ext + 2 * GUARD);
  char* rbuf = rmem + GUARD;
  char* ref = malloc(mine * d->ext + 1);
  char* e = malloc(d->ext);
  char call[400];
  char at[32] = "";
  if (coll == 1) snprintf(at, sizeof at, ", root %d", root);
  snprintf(call, sizeof call, "%s%s of %d %s, op %s%s%s%s on %s (%d ranks), %s data", colln[coll], formn[form], n,
           d->name, opn[op], at, ip ? ", MPI_IN_PLACE" : "", unequal ? ", unequal counts" : "", x->name, x->size,
           wild ? "wild" : "tame");
  if (trace) fprintf(stderr, "c_types: rank %d: %s\n", wrank, call);
  /* A non-root's receive buffer of reduce is insignificant: NULL half the time, else it must stay untouched.
   * (Drawn on every rank, so that all draw alike.) */
  const int null_recv = pick(2);
  void* r = coll == 1 && x->rank != root && null_recv && form != 2 ? NULL : rbuf;
  const void* s = ip ? MPI_IN_PLACE : sbuf;
  MPI_Datatype t = d->t;
  MPI_Op o = mop[op];
  MPI_Request preq = MPI_REQUEST_NULL;
  int err = MPI_SUCCESS;
  for (int rep = 0; rep < reps; ++rep) {
    const uint64_t k = key * 4 + (uint64_t)rep;
    memset(rmem, SENT, rcount * d->ext + 2 * GUARD);
    for (size_t j = 0; j < total; ++j) gen(d, op, k, wrank, j, wild, x->size, (ip ? rbuf : sbuf) + j * d->ext);
    MPI_Request req = MPI_REQUEST_NULL;
    switch (coll * 3 + form) {
      case 0: err = MPI_Allreduce(s, r, n, t, o, x->c); break;
      case 1: err = MPI_Iallreduce(s, r, n, t, o, x->c, &req); break;
      case 2:
        if (rep == 0) err = Allreduce_init(s, r, n, t, o, x->c, MPI_INFO_NULL, &preq);
        break;
      case 3: err = MPI_Reduce(s, r, n, t, o, root, x->c); break;
      case 4: err = MPI_Ireduce(s, r, n, t, o, root, x->c, &req); break;
      case 5:
        if (rep == 0) err = Reduce_init(s, r, n, t, o, root, x->c, MPI_INFO_NULL, &preq);
        break;
      case 6: err = MPI_Reduce_scatter_block(s, r, n, t, o, x->c); break;
      case 7: err = MPI_Ireduce_scatter_block(s, r, n, t, o, x->c, &req); break;
      case 8:
        if (rep == 0) err = Reduce_scatter_block_init(s, r, n, t, o, x->c, MPI_INFO_NULL, &preq);
        break;
      case 9: err = MPI_Reduce_scatter(s, r, counts, t, o, x->c); break;
      case 10: err = MPI_Ireduce_scatter(s, r, counts, t, o, x->c, &req); break;
    }
    if (!complete(call, form, err, &req, preq)) break;
    if (coll == 1 && x->rank != root) {
      if (r) check_guard(call, "a non-root's receive buffer", (unsigned char*)rmem, rcount * d->ext + 2 * GUARD);
      continue;
    }
    /* The reference: element base+j over the communicator's ranks in order. */
    for (size_t j = 0; j < mine; ++j) {
      char* o_ = ref + j * d->ext;
      gen(d, op, k, x->world[0], base + j, wild, x->size, o_);
      for (int q = 1; q < x->size; ++q) {
        gen(d, op, k, x->world[q], base + j, wild, x->size, e);
        combine(d, op, o_, e);
      }
    }
    check_result(call, d, rbuf, ref, mine);
    check_guard(call, "the guard before the receive buffer", (unsigned char*)rmem, GUARD);
    check_guard(call, "the guard after the receive buffer", (unsigned char*)rbuf + rcount * d->ext, GUARD);
  }
  if (preq != MPI_REQUEST_NULL) MPI_Request_free(&preq);
  ++ncalls[coll][form];
  free(sbuf);
  free(rmem);
  free(ref);
  free(e);
}

/* ---- bcast and allgather with each rank's own layout --------------------------------------- */

typedef struct {
  int kind;
  MPI_Datatype t;
  int ipe;         /* ints per element */
  MPI_Aint ext;    /* the element's extent */
  MPI_Aint* inner; /* the byte offset of each of its ints from the element's start */
  int bottom;      /* absolute addresses: the buffer argument is MPI_BOTTOM */
} layout;
static const char* lname[] = {"plain int",
                              "contiguous",
                              "vector with gaps",
                              "resized (gap after)",
                              "resized (negative lower bound)",
                              "struct, fields reversed",
                              "indexed, blocks reversed",
                              "MPI_BOTTOM",
                              "dup of contiguous",
                              "leading gap",
                              "contiguous of vectors",
                              "negative stride"};
enum { NL = 12 };
#if defined(MPICH_VERSION)
/* MPICH 4.0.2 aborts in the dup of a contiguous type and in the contiguous type of vectors (without collc too). */
static const int kinds[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 11};
#else
static const int kinds[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
#endif
enum { NK = sizeof kinds / sizeof kinds[0] };

/* A layout of `nints` ints (a multiple of 12), k ints per block, gap ints between blocks. */
static layout make(int kind, int nints, int k, int gap, char* base) {
  layout l = {kind, MPI_INT, 1, 4, NULL, 0};
  l.inner = malloc(sizeof(MPI_Aint) * (size_t)(nints > 24 ? nints : 24));
  l.inner[0] = 0;
  switch (kind) {
    case 1:
    case 8: {
      MPI_Datatype c;
      MPI_Type_contiguous(k, MPI_INT, &c);
      if (kind == 8) {
        MPI_Type_dup(c, &l.t);
        MPI_Type_free(&c);
      } else
        l.t = c;
      l.ipe = k, l.ext = 4 * k;
      for (int i = 0; i < k; ++i) l.inner[i] = 4 * i;
      break;
    }
    case 2:
      MPI_Type_vector(nints / k, k, k + gap, MPI_INT, &l.t);
      l.ipe = nints, l.ext = ((MPI_Aint)(nints / k - 1) * (k + gap) + k) * 4;
      for (int i = 0; i < nints; ++i) l.inner[i] = (MPI_Aint)(i / k) * (k + gap) * 4 + (i % k) * 4;
      break;
    case 3:
    case 4:
      MPI_Type_create_resized(MPI_INT, kind == 3 ? 0 : -4 * gap, 4 + 4 * gap, &l.t);
      l.ext = 4 + 4 * gap;
      break;
    case 5: {
      int bl[2] = {1, 1};
      MPI_Aint dd[2] = {4, 0};
      MPI_Datatype ts[2] = {MPI_INT, MPI_INT};
      MPI_Type_create_struct(2, bl, dd, ts, &l.t);
      l.ipe = 2, l.ext = 8, l.inner[0] = 4, l.inner[1] = 0;
      break;
    }
    case 6: {
      int bl[2] = {k, k}, dd[2] = {k, 0};
      MPI_Type_indexed(2, bl, dd, MPI_INT, &l.t);
      l.ipe = 2 * k, l.ext = 8 * k;
      for (int i = 0; i < 2 * k; ++i) l.inner[i] = i < k ? 4 * (k + i) : 4 * (i - k);
      break;
    }
    case 7: {
      MPI_Aint a;
      MPI_Get_address(base, &a);
      int bl = nints;
      MPI_Type_create_hindexed(1, &bl, &a, MPI_INT, &l.t);
      l.ipe = nints, l.ext = 4 * (MPI_Aint)nints, l.bottom = 1;
      for (int i = 0; i < nints; ++i) l.inner[i] = 4 * i;
      break;
    }
    case 9: {
      int bl = k;
      MPI_Aint dd = 8;
      MPI_Datatype ti = MPI_INT, st;
      MPI_Type_create_struct(1, &bl, &dd, &ti, &st);
      MPI_Type_create_resized(st, 0, 8 + 4 * k, &l.t);
      MPI_Type_free(&st);
      l.ipe = k, l.ext = 8 + 4 * k;
      for (int i = 0; i < k; ++i) l.inner[i] = 8 + 4 * i;
      break;
    }
    case 10: {
      MPI_Datatype v;
      MPI_Type_vector(2, 1, 2, MPI_INT, &v); /* extent 12 */
      MPI_Type_contiguous(2, v, &l.t);
      MPI_Type_free(&v);
      l.ipe = 4, l.ext = 24;
      l.inner[0] = 0, l.inner[1] = 8, l.inner[2] = 12, l.inner[3] = 20;
      break;
    }
    case 11:
      MPI_Type_create_hvector(2, 1, -4, MPI_INT, &l.t);
      l.ipe = 2, l.ext = 8, l.inner[0] = 0, l.inner[1] = -4;
      break;
  }
  if (l.t != MPI_INT) MPI_Type_commit(&l.t);
  return l;
}
static void unmake(layout* l) {
  if (l->t != MPI_INT) MPI_Type_free(&l->t);
  free(l->inner);
}
static MPI_Aint off(const layout* l, size_t m) { return (MPI_Aint)(m / l->ipe) * l->ext + l->inner[m % l->ipe]; }

#define MARGIN 256
#define MSENT 0x5C
typedef struct {
  char* mem;
  char* buf; /* element 0 */
  size_t bytes;
} region;
/* A region for `total` ints in layout l, with MARGIN bytes either side. */
static region alloc_region(const layout* l, size_t total) {
  MPI_Aint lo = 0, hi = 4;
  for (int i = 0; i < l->ipe; ++i) {
    if (l->inner[i] < lo) lo = l->inner[i];
    if (l->inner[i] + 4 > hi) hi = l->inner[i] + 4;
  }
  hi += (MPI_Aint)((total + l->ipe - 1) / l->ipe) * l->ext;
  region r;
  r.bytes = (size_t)(hi - lo) + 2 * MARGIN;
  r.mem = malloc(r.bytes);
  r.buf = r.mem + MARGIN - lo;
  return r;
}
static int ival(uint64_t key, int r, size_t i) { return (int)mix(seed ^ mix((key << 40) ^ ((uint64_t)r << 32) ^ i)); }
static void compare_bytes(const char* call, const char* what, const char* got, const char* exp, size_t n) {
  for (size_t b = 0; b < n; ++b)
    if (got[b] != exp[b]) {
      char m[200];
      snprintf(m, sizeof m, "%s: byte %zu of %zu differs: got %02x, expected %02x", what, b, n, (unsigned char)got[b],
               (unsigned char)exp[b]);
      report(call, m);
      return;
    }
}

static int nmoves[2][3], kind_seen[NL];
static void move(int it) {
  commx* x = &cx[pick(NC)];
  const int bcast = it % 2;
  int form = (it / 2) % 3; /* 0 blocking, 1 nonblocking, 2 persistent */
#if defined(MPICH_VERSION)
  /* MPICH 4.0.2's persistent allgather with derived types trips an assertion
   * (a datatype's reference count) when the request is freed, and in place
   * writes wrong bytes (without collc too): no persistent allgather. */
  if (form == 2 && !bcast) form = 0;
#endif
  const int root = pick(64) % x->size, reps = form == 2 ? 1 + pick(2) : 1;
  const int inplace = !bcast && pick(3) == 0;
  int nints;
  {
    const int k = pick(10);
    nints = k < 7 ? 12 * (1 + pick(8)) : k < 9 ? 12 * (10 + pick(300)) : 12 * (4000 + pick(2000));
    if (!bcast && x->size > 2 && nints > 12 * 3000) nints = nints / 24 * 12; /* still a multiple of 12 */
  }
  /* This rank's own layouts: every kind on every rank as `it` goes on, each rank a different one. */
  static const int ks[] = {1, 2, 3, 6, 12};
  const int skind = kinds[(it + 3 * wrank) % NK], rkind = kinds[(it / 2 + 5 * wrank + 1) % NK];
  int sk = ks[(it + wrank) % 5], rk = ks[(it / 3 + 2 * wrank) % 5];
  const int sg = 1 + (it + wrank) % 3, rg = 1 + (it / 5 + wrank) % 3;
  if (skind == 6 && sk == 12) sk = 6;
  if (rkind == 6 && rk == 12) rk = 6;
  kind_seen[skind] = kind_seen[rkind] = 1;
  const size_t total = bcast ? (size_t)nints : (size_t)nints * x->size;
  /* MPI_BOTTOM types need the buffer's address: allocate with the plain layout first. */
  layout rl = make(rkind == 7 ? 0 : rkind, nints, rk, rg, NULL), sl = make(skind == 7 ? 0 : skind, nints, sk, sg, NULL);
  region R = alloc_region(&rl, total), S = alloc_region(&sl, (size_t)nints);
  if (rkind == 7) {
    unmake(&rl);
    rl = make(7, nints, rk, rg, R.buf);
  }
  if (skind == 7) {
    unmake(&sl);
    sl = make(7, nints, sk, sg, S.buf);
  }
  char* expect = malloc(R.bytes);
  char* sexpect = malloc(S.bytes);
  char call[300];
  snprintf(call, sizeof call,
           "%s%s of %d ints, root %d%s, on %s (%d ranks), this rank's layouts: send %s/%d, receive %s/%d",
           bcast ? "bcast" : "allgather", formn[form], nints, root, inplace ? ", MPI_IN_PLACE" : "", x->name, x->size,
           lname[skind], sk, lname[rkind], rk);
  if (trace) fprintf(stderr, "c_types: rank %d: %s\n", wrank, call);
  MPI_Request preq = MPI_REQUEST_NULL;
  const int rcount = nints / rl.ipe, scount = nints / sl.ipe;
  void* rarg = rl.bottom ? MPI_BOTTOM : R.buf;
  void* sarg = sl.bottom ? MPI_BOTTOM : S.buf;
  for (int rep = 0; rep < reps; ++rep) {
    const uint64_t key = (uint64_t)it * 4 + (uint64_t)rep + (1u << 20);
    memset(R.mem, MSENT, R.bytes);
    memset(S.mem, MSENT, S.bytes);
    if (bcast) {
      if (x->rank == root)
        for (int i = 0; i < nints; ++i) {
          const int v = ival(key, wrank, (size_t)i);
          memcpy(R.buf + off(&rl, (size_t)i), &v, 4);
        }
    } else
      for (int i = 0; i < nints; ++i) {
        const int v = ival(key, wrank, (size_t)i);
        if (inplace)
          memcpy(R.buf + off(&rl, (size_t)x->rank * nints + i), &v, 4);
        else
          memcpy(S.buf + off(&sl, (size_t)i), &v, 4);
      }
    memcpy(sexpect, S.mem, S.bytes);
    memset(expect, MSENT, R.bytes);
    char* eb = expect + (R.buf - R.mem);
    for (size_t m = 0; m < total; ++m) {
      const int src = bcast ? root : (int)(m / nints);
      const int v = ival(key, x->world[src], bcast ? m : m % nints);
      memcpy(eb + off(&rl, m), &v, 4);
    }
    MPI_Request req = MPI_REQUEST_NULL;
    int err;
    if (bcast) {
      if (form == 1)
        err = MPI_Ibcast(rarg, rcount, rl.t, root, x->c, &req);
      else if (form == 2)
        err = rep == 0 ? Bcast_init(rarg, rcount, rl.t, root, x->c, MPI_INFO_NULL, &preq) : MPI_SUCCESS;
      else
        err = MPI_Bcast(rarg, rcount, rl.t, root, x->c);
    } else {
      const void* s = inplace ? MPI_IN_PLACE : sarg;
      const int sc = inplace ? 0 : scount;
      const MPI_Datatype st = inplace ? MPI_DATATYPE_NULL : sl.t;
      if (form == 1)
        err = MPI_Iallgather(s, sc, st, rarg, rcount, rl.t, x->c, &req);
      else if (form == 2)
        err = rep == 0 ? Allgather_init(s, sc, st, rarg, rcount, rl.t, x->c, MPI_INFO_NULL, &preq) : MPI_SUCCESS;
      else
        err = MPI_Allgather(s, sc, st, rarg, rcount, rl.t, x->c);
    }
    if (!complete(call, form, err, &req, preq)) break;
    compare_bytes(call, "the receive region (gaps and margins included)", R.mem, expect, R.bytes);
    compare_bytes(call, "the send region", S.mem, sexpect, S.bytes);
  }
  if (preq != MPI_REQUEST_NULL) MPI_Request_free(&preq);
  ++nmoves[bcast][form];
  unmake(&rl);
  unmake(&sl);
  free(R.mem);
  free(S.mem);
  free(expect);
  free(sexpect);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  int wsize;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
  const int per_pair = argc > 2 ? atoi(argv[2]) : 2, move_calls = argc > 3 ? atoi(argv[3]) : 144;
  if (per_pair < 1 || move_calls < 0 || wsize > 6) {
    if (wrank == 0) fprintf(stderr, "c_types: calls_per_pair >= 1, move_calls >= 0, at most 6 ranks (tame data)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  params_state = seed * 0x2545f4914f6cdd1dull + 1;
  {
    const char* pre = getenv("LD_PRELOAD");
    const char* from = getenv("COLLC_PMPI_FROM_CALL");
    const char* sizes = getenv("COLLC_PMPI_SIZES");
    const char* on = getenv("COLLC_PMPI");
    lib_takes = pre && strstr(pre, "collc") && from && strcmp(from, "1") == 0 && sizes && strcmp(sizes, "all") == 0 &&
                !(on && strcmp(on, "0") == 0) && !getenv("COLLC_PMPI_COLLECTIVES");
  }
  (void)add_doubles; /* c_shared.h's, not used here */
  trace = getenv("C_TYPES_TRACE") != NULL;
  init_types();
  MPI_Op_create(u_sum, 1, &mop[U_SUM]);
  MPI_Op_create(u_firstnz, 0, &mop[U_FIRSTNZ]);
  MPI_Op_create(u_concat, 0, &mop[U_CONCAT]);
  MPI_Op_create(compose, 0, &mop[U_AFFINE]);
  const MPI_Op pre[] = {MPI_SUM,  MPI_PROD, MPI_MIN, MPI_MAX,  MPI_BAND,   MPI_BOR,
                        MPI_BXOR, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_MINLOC, MPI_MAXLOC};
  for (int i = 0; i < 12; ++i) mop[i] = pre[i];
  make_comms(wsize);

  int pairs = 0;
  uint64_t key = 0;
  for (int ti = 0; ti < NT; ++ti) {
    const tdesc* d = &T[ti];
    char line[512];
    int k = snprintf(line, sizeof line, "%s:", d->name);
    if (!d->usable) {
      if (wrank == 0) printf("%s left out (not in this MPI, or another size)\n", line);
      continue;
    }
    for (int op = 0; op < NOPS; ++op) {
      if (!valid(d, op)) continue;
      ++pairs;
      k += snprintf(line + k, sizeof line - k, " %s",
                    op < U_SUM        ? opn[op]
                    : op == U_SUM     ? "user-sum"
                    : op == U_FIRSTNZ ? "user-first-nonzero"
                    : op == U_CONCAT  ? "user-concat"
                                      : "user-affine");
      for (int c = 0; c < per_pair; ++c) reduction(++key, d, op);
    }
    if (wrank == 0) printf("%s\n", line);
  }
  for (int it = 0; it < move_calls; ++it) move(it);

  int all = 0, checks = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce(&nchecks, &checks, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (wrank == 0) {
    printf("reductions: %d type/operator pairs, %d calls each:", pairs, per_pair);
    for (int c = 0; c < 4; ++c) printf(" %s %d/%d/%d", colln[c], ncalls[c][0], ncalls[c][1], ncalls[c][2]);
    printf(" (blocking/nonblocking/persistent)\n");
    int seen = 0;
    for (int i = 0; i < NL; ++i) seen += kind_seen[i];
    printf("bcast %d/%d/%d, allgather %d/%d/%d over %d layouts\n", nmoves[1][0], nmoves[1][1], nmoves[1][2],
           nmoves[0][0], nmoves[0][1], nmoves[0][2], seen);
    if (all)
      printf("FAILED: %d wrong results (see the ranks' messages)\n", all);
    else
      printf("ok: seed %llu, %d results checked over all ranks\n", (unsigned long long)seed, checks);
  }
  for (int i = 1; i < 4; ++i) MPI_Comm_free(&cx[i].c);
  for (int i = U_SUM; i < NOPS; ++i) MPI_Op_free(&mop[i]);
  for (int i = 0; i < NC; ++i) free(cx[i].world);
  MPI_Finalize();
  return all != 0;
}
