// Shared by the kernels that must round as NumPy's ufuncs do, one rounding per operation
// (optim.cu, activation_grads.cu): on a GPU the additions and products go through the _rn
// intrinsics, which the compiler may not fuse into an FMA (one rounding fewer than NumPy's).
// Included by path, as row_reduce.cuh is.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
#else  // the CPU build of the same source (plugtorch.testing.cuda_cpu): ISO C++ does not contract
template <class T> inline T add_rn(T a, T b) { return a + b; }
template <class T> inline T sub_rn(T a, T b) { return a - b; }
template <class T> inline T mul_rn(T a, T b) { return a * b; }
#endif
