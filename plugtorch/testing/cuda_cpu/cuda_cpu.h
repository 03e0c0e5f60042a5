// Run CUDA kernels on the CPU: the same .cu source nvcc and NVRTC compile, built with
// g++ -std=c++20 -include cuda_cpu.h. The threads of a block are fibers on one OS thread: each runs until it reaches __syncthreads() or returns, and a barrier round ends when
// every thread of the block has arrived, so block reductions in __shared__ memory work; blocks
// run one after another, so __shared__ can be a function-local static. A block whose threads
// do not all reach the same barrier (undefined behaviour in CUDA) is reported, not hung.
// Not a simulator of GPU timing or memory model: a check of what kernels compute, including
// odd sizes that leave threads idle.
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cstdint>
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

// CUDA_CPU_UCONTEXT selects the portable switch on x86-64 too (for tools that follow
// swapcontext but not a hand-written switch).
#if defined(__x86_64__) && !defined(CUDA_CPU_UCONTEXT)
#define CUDA_CPU_FAST_SWITCH 1
#endif

struct Fiber {
#if CUDA_CPU_FAST_SWITCH
    void* sp;
#else
    ucontext_t context;
#endif
    uint3 idx;
    bool done;
};

inline Fiber* running = nullptr;  // set only while a fiber runs
inline void (*body)(void*) = nullptr;  // the kernel call of the current launch
inline void* body_arg = nullptr;
inline char launch_error[512] = "";  // what went wrong in the last launch ("" when nothing)

constexpr std::size_t kStack = 256 * 1024;
constexpr std::size_t kStackGuard = 64 * 1024;  // below each stack: an overflow faults, corrupting nothing
inline std::vector<char*> stacks;  // kept across launches

inline char* stack_for(unsigned int t) {
    while (stacks.size() <= t) {
        void* base = mmap(nullptr, kStack + kStackGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED || mprotect(base, kStackGuard, PROT_NONE) != 0) {
            std::fprintf(stderr, "cuda_cpu: cannot map a %zu-byte fiber stack\n", kStack);
            std::abort();
        }
        stacks.push_back(static_cast<char*>(base) + kStackGuard);
    }
    return stacks[t];
}

#if CUDA_CPU_FAST_SWITCH
// The switch keeps what the System V ABI says survives a call (rbx, rbp, r12-r15, the SSE and
// x87 control words) on the stack it leaves, and nothing else: no signal mask, hence no system
// call. A launch switches once per thread per barrier; with swapcontext that was most of
// its time (a softmax over 64 rows of 100 with 128 threads: 82 ms, against 8 ms with this).
extern "C" __attribute__((visibility("hidden"))) void cuda_cpu_switch(void** from, void* to);
asm(".pushsection .text\n"
    ".p2align 4\n"
    ".globl cuda_cpu_switch\n"
    ".hidden cuda_cpu_switch\n"
    ".type cuda_cpu_switch, @function\n"
    "cuda_cpu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cuda_cpu_switch, .-cuda_cpu_switch\n"
    ".popsection\n");

inline void* scheduler_sp = nullptr;

[[noreturn]] inline void fiber_main() {
    body(body_arg);
    running->done = true;
    cuda_cpu_switch(&running->sp, scheduler_sp);
    __builtin_unreachable();
}

inline void start_fiber(Fiber& f, char* stack) {
    auto* top = reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::uintptr_t>(stack + kStack) & ~std::uintptr_t{15});
    *--top = 0;  // fiber_main's return address: it never returns
    *--top = reinterpret_cast<std::uint64_t>(&fiber_main);  // where the first switch returns to
    for (int i = 0; i < 6; ++i) *--top = 0;  // rbp, rbx, r12-r15
    std::uint32_t mxcsr;
    std::uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    *--top = mxcsr | (std::uint64_t{fpucw} << 32);
    f.sp = top;
}

inline void resume(Fiber& f) {
    running = &f;
    thread_idx = f.idx;
    cuda_cpu_switch(&scheduler_sp, f.sp);
    running = nullptr;
}

inline void yield_to_scheduler() { cuda_cpu_switch(&running->sp, scheduler_sp); }

#else
inline ucontext_t scheduler;

inline void fiber_main() {
    body(body_arg);
    running->done = true;  // then return to the scheduler through uc_link
}

inline void start_fiber(Fiber& f, char* stack) {
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = stack;
    f.context.uc_stack.ss_size = kStack;
    f.context.uc_link = &scheduler;
    makecontext(&f.context, fiber_main, 0);
}

inline void resume(Fiber& f) {
    running = &f;
    thread_idx = f.idx;
    swapcontext(&scheduler, &f.context);
    running = nullptr;
}

inline void yield_to_scheduler() { swapcontext(&running->context, &scheduler); }

#endif

inline void barrier() { yield_to_scheduler(); }

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
    std::vector<Fiber> fibers(n);
    for (unsigned int bz = 0; bz < grid.z; ++bz)
        for (unsigned int by = 0; by < grid.y; ++by)
            for (unsigned int bx = 0; bx < grid.x; ++bx) {
                block_idx = {bx, by, bz};
                for (unsigned int t = 0; t < n; ++t) {
                    Fiber& f = fibers[t];
                    f.idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    f.done = false;
                    start_fiber(f, stack_for(t));
                }
                for (unsigned int live = n; live > 0;) {  // one barrier round per pass
                    unsigned int finished = 0;
                    for (Fiber& f : fibers) {
                        if (f.done) continue;
                        resume(f);
                        finished += f.done;
                    }
                    if (finished != 0 && finished != live) {  // the waiting fibers are abandoned
                        std::snprintf(launch_error, sizeof launch_error,
                                      "block (%u,%u,%u): %u of %u threads returned while the others wait at "
                                      "__syncthreads() (a divergent barrier: undefined behaviour in CUDA, a hang or "
                                      "garbage on a GPU)", bx, by, bz, finished, live);
                        return;
                    }
                    live -= finished;
                }
            }
}

}  // namespace cuda_cpu
