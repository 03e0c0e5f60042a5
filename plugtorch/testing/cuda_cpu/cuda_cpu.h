// Run CUDA kernels on the CPU: the same .cu source nvcc and NVRTC compile, built with
// g++ -std=c++20 -include cuda_cpu.h. The threads of a block are fibers (ucontext) on one OS
// thread: each runs until it reaches __syncthreads() or returns, and a barrier round ends when
// every thread of the block has arrived, so block reductions in __shared__ memory work; blocks
// run one after another, so __shared__ can be a function-local static. A block whose threads
// do not all reach the same barrier (undefined behaviour in CUDA) is reported, not hung.
// Not a simulator of GPU timing or memory model: a check of what kernels compute, including
// odd sizes that leave threads idle.
#pragma once
#include <ucontext.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

namespace cuda_cpu {
inline uint3 thread_idx, block_idx;  // the running fiber's coordinates
inline dim3 block_dim, grid_dim;
inline void barrier();
}  // namespace cuda_cpu

#define threadIdx (cuda_cpu::thread_idx)
#define blockIdx (cuda_cpu::block_idx)
#define blockDim (cuda_cpu::block_dim)
#define gridDim (cuda_cpu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __shared__ static  // blocks run one after another, so one copy serves each block in turn
#define __launch_bounds__(...)

inline void __syncthreads() { cuda_cpu::barrier(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T> inline T atomicAdd(T* address, T value) { return std::atomic_ref<T>(*address).fetch_add(value); }
template <class T> inline T atomicMax(T* address, T value) {
    std::atomic_ref<T> ref(*address);
    T old = ref.load();
    while (old < value && !ref.compare_exchange_weak(old, value)) {}
    return old;
}
template <class T> inline T atomicExch(T* address, T value) { return std::atomic_ref<T>(*address).exchange(value); }

inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return static_cast<unsigned int>((static_cast<unsigned long long>(a) * b) >> 32);
}
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
inline float __uint_as_float(unsigned int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, sizeof v); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, sizeof v); return v; }

namespace cuda_cpu {

// The parameter types of a kernel as NumPy dtype names ("*float32" for a pointer), so the
// Python launcher can refuse an argument the GPU would silently misread.
template <class T> constexpr const char* dtype_name() {
    using U = std::remove_cv_t<T>;
    if constexpr (std::is_same_v<U, bool>) return "bool";
    else if constexpr (std::is_same_v<U, float>) return "float32";
    else if constexpr (std::is_same_v<U, double>) return "float64";
    else if constexpr (std::is_integral_v<U> && std::is_signed_v<U>) {
        if constexpr (sizeof(U) == 1) return "int8";
        else if constexpr (sizeof(U) == 2) return "int16";
        else if constexpr (sizeof(U) == 4) return "int32";
        else return "int64";
    } else if constexpr (std::is_integral_v<U>) {
        if constexpr (sizeof(U) == 1) return "uint8";
        else if constexpr (sizeof(U) == 2) return "uint16";
        else if constexpr (sizeof(U) == 4) return "uint32";
        else return "uint64";
    } else return "unsupported";
}

template <class T> std::string param_code() {
    if constexpr (std::is_pointer_v<T>) {
        using E = std::remove_pointer_t<T>;
        return std::string(std::is_const_v<E> ? "*const " : "*") + dtype_name<E>();
    }
    else return dtype_name<T>();
}

template <class... A> std::string signature(void (*)(A...)) {
    std::string s;
    ((s += param_code<A>() + ","), ...);
    return s;
}

template <class... A, std::size_t... I>
void invoke(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

struct Fiber {
    ucontext_t context;
    uint3 idx;
    bool done;
};

inline ucontext_t scheduler;
inline Fiber* running = nullptr;
inline void (*body)(void*) = nullptr;  // the kernel call of the current launch
inline void* body_arg = nullptr;
constexpr std::size_t kStack = 256 * 1024;
inline std::vector<std::unique_ptr<char[]>> stacks;  // kept across launches

inline void barrier() { swapcontext(&running->context, &scheduler); }
inline char launch_error[512] = "";  // what went wrong in the last launch ("" when nothing)

inline void fiber_entry() {
    body(body_arg);
    running->done = true;  // then return to the scheduler through uc_link
}

template <class... A> struct Call {
    void (*kernel)(A...);
    void** args;
    static void run(void* self) {
        auto* c = static_cast<Call*>(self);
        invoke(c->kernel, c->args, std::index_sequence_for<A...>{});
    }
};

// Launch <<<grid, block>>>: each block's threads as fibers, scheduled in barrier rounds.
template <class... A>
void launch(void (*kernel)(A...), dim3 grid, dim3 block, void** args) {
    grid_dim = grid;
    block_dim = block;
    Call<A...> call{kernel, args};
    body = &Call<A...>::run;
    body_arg = &call;
    launch_error[0] = '\0';
    const unsigned int n = block.x * block.y * block.z;
    while (stacks.size() < n) stacks.emplace_back(new char[kStack]);
    std::vector<Fiber> fibers(n);
    for (unsigned int bz = 0; bz < grid.z; ++bz)
        for (unsigned int by = 0; by < grid.y; ++by)
            for (unsigned int bx = 0; bx < grid.x; ++bx) {
                block_idx = {bx, by, bz};
                for (unsigned int t = 0; t < n; ++t) {
                    Fiber& f = fibers[t];
                    f.idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    f.done = false;
                    getcontext(&f.context);
                    f.context.uc_stack.ss_sp = stacks[t].get();
                    f.context.uc_stack.ss_size = kStack;
                    f.context.uc_link = &scheduler;
                    makecontext(&f.context, fiber_entry, 0);
                }
                for (unsigned int live = n; live > 0;) {  // one barrier round per pass
                    unsigned int finished = 0;
                    for (Fiber& f : fibers) {
                        if (f.done) continue;
                        running = &f;
                        thread_idx = f.idx;
                        swapcontext(&scheduler, &f.context);
                        finished += f.done;
                    }
                    if (finished != 0 && finished != live) {  // the waiting fibers are abandoned
                        std::snprintf(launch_error, sizeof launch_error,
                                      "block (%u,%u,%u): %u of %u threads returned while the others wait at "
                                      "__syncthreads() (a divergent barrier: undefined behaviour in CUDA, a hang or "
                                      "garbage on a GPU)", bx, by, bz, finished, live);
                        running = nullptr;
                        return;
                    }
                    live -= finished;
                }
            }
    running = nullptr;
}

}  // namespace cuda_cpu
