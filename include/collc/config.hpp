#pragma once
/// \file
/// Header-only or compiled, the way Asio (ASIO_SEPARATE_COMPILATION) and
/// {fmt} (FMT_HEADER_ONLY) do it.
///
/// Header-only is the default and needs nothing but the include path: a
/// header that declares type-independent functions (MPI setup, lowering at
/// run time, selection, wisdom) includes their definitions from its `.ipp`
/// file, marked `inline`. With the CMake component `compiled`
/// (target collc::compiled), COLLC_SEPARATE_COMPILATION is defined: the
/// headers only declare those functions, and src/collc.cpp compiles every
/// `.ipp` once into libcollc_compiled. Templated code (the interpreter, the
/// typed plans) and `constexpr` lowering stay in the headers in both modes.
#if defined(COLLC_SEPARATE_COMPILATION)
#define COLLC_HEADER_ONLY 0
#define COLLC_INLINE
#else
#define COLLC_HEADER_ONLY 1
#define COLLC_INLINE inline
#endif
