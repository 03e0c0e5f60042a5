// Run CUDA kernels on the CPU: the same .cu source nvcc and NVRTC compile, built with
// g++ -std=c++20 -include cuda_cpu.h after the builder (__init__.py) has rewritten each
// `__shared__ T name[N];` into bounds-checked storage (a SharedSlot).
//
// Threads: the threads of a block are fibers on one OS thread. Each runs until it reaches
// __syncthreads() or returns, and a barrier round ends when every thread of the block has
// arrived, so block reductions in __shared__ memory work; blocks run one after another. All
// threads of a round must wait at the same __syncthreads() call, or all return: anything else
// is a divergent barrier (undefined behaviour in CUDA) and is reported, not hung.
//
// Orders: a launch runs once per order (ascending, descending, or a seeded shuffle of the
// threads in every barrier round and of the blocks of the grid), each run on fresh copies of
// the arguments and with __shared__ memory filled with another byte pattern; the writable
// arguments must come out bit for bit the same. A GPU runs the threads between two barriers
// in no fixed order, so a result that depends on the order is a race (or a read of __shared__
// memory nobody wrote), which one fixed order would hide.
//
// Bounds: every array argument is copied into pages between inaccessible guards, and so is
// every __shared__ array; an access that strays there faults and is reported with the
// thread, the array and the element. Runs alternate which end of the array touches its
// guard, so an index past the end faults in one run and one before the start in the next. An
// array argument keeps its address modulo 16, so up to 15 bytes of padding can lie between
// it and a guard: a write there is found after the run, without the thread, and a read gives
// another value in each run (the padding holds another byte), which the comparison sees.
//
// Not a simulator of GPU timing or memory model: a check of what kernels compute, including
// odd sizes that leave threads idle.
#pragma once
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x = 1, y = 1, z = 1; };

namespace cuda_cpu {
inline uint3 thread_idx, block_idx;  // the running fiber's coordinates
inline dim3 block_dim, grid_dim;
inline void barrier(const std::source_location& site);
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
// The builder rewrites every __shared__ array it can check; one it could not (several names
// in one declaration, an initializer, extern) stops the build here rather than run unchecked.
#define __shared__ cuda_cpu_cannot_check_this_shared_declaration
#define __launch_bounds__(...)  // read by the builder, which refuses a larger block before launching

// The call site identifies the barrier: threads of one round waiting at different calls diverged.
inline void __syncthreads(std::source_location site = std::source_location::current()) { cuda_cpu::barrier(site); }
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

// ---- parameter types ---------------------------------------------------------------------

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

struct Param {
    bool pointer, writable;
    std::size_t itemsize;
    const char* dtype;
};

template <class T> constexpr Param param_of() {
    if constexpr (std::is_pointer_v<T>) {
        using E = std::remove_pointer_t<T>;
        return {true, !std::is_const_v<E>, sizeof(std::conditional_t<std::is_void_v<E>, char, E>), dtype_name<E>()};
    } else {
        return {false, false, sizeof(T), dtype_name<T>()};
    }
}

inline char launch_error[2048] = "";  // what went wrong in the last launch ("" when nothing)

inline bool fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(launch_error, sizeof launch_error, format, args);
    va_end(args);
    return false;
}

// ---- guarded memory ----------------------------------------------------------------------

inline const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
// Inaccessible bytes on each side of an array: an index that strays this far out (a block
// twice the size, a wrong stride) faults and is reported instead of reading or corrupting
// whatever lies there. Reserved address space only: it costs no memory. A __shared__ array
// is at most a few hundred KiB on a GPU, and its indices stray less far.
constexpr std::size_t kGuard = std::size_t{64} << 20;
constexpr std::size_t kSharedGuard = std::size_t{4} << 20;

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

struct Guarded {  // accessible pages [lo, hi), `guard` inaccessible bytes before and after
    char* lo = nullptr;
    char* hi = nullptr;
    std::size_t guard = 0;
    bool near(const char* p) const { return lo != nullptr && p >= lo - guard && p < hi + guard; }
};

inline Guarded map_guarded(std::size_t bytes, std::size_t guard) {
    const std::size_t inner = round_up(bytes, kPage);
    void* base = mmap(nullptr, inner + 2 * guard, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        std::fprintf(stderr, "cuda_cpu: cannot reserve %zu bytes of address space\n", inner + 2 * guard);
        std::abort();
    }
    char* lo = static_cast<char*>(base) + guard;
    if (inner && mprotect(lo, inner, PROT_READ | PROT_WRITE) != 0) {
        std::fprintf(stderr, "cuda_cpu: cannot map %zu bytes\n", inner);
        std::abort();
    }
    return {lo, lo + inner, guard};
}

inline void unmap_guarded(Guarded& g) {
    if (g.lo) munmap(g.lo - g.guard, static_cast<std::size_t>(g.hi - g.lo) + 2 * g.guard);
    g = {};
}

// Where `bytes` start in g: against the upper guard or the lower one, at an address that is
// `phase` modulo `align`.
inline char* place(const Guarded& g, std::size_t bytes, std::size_t align, std::size_t phase, bool at_end) {
    if (!at_end) return g.lo + phase;
    char* start = g.hi - bytes;
    return start - ((reinterpret_cast<std::uintptr_t>(start) - phase) % align);
}

// The state of the current run, for the __shared__ arrays that are placed on first use.
inline unsigned long long run_id = 0;  // counts runs of all launches
inline bool run_at_end = true;         // which guard this run's arrays touch
inline unsigned char run_fill = 0;     // the byte __shared__ memory holds when a block starts

// One `__shared__ T name[N];` of the source. Constant-initialised (no guard variable), its
// storage mapped on first use and placed anew for each run.
struct Slot {
    const char* name;
    const char* dtype;
    std::size_t bytes, itemsize, align;
    Guarded mem{};
    char* start = nullptr;
    unsigned long long run = 0;  // the run it was placed for
};
inline std::vector<Slot*> slots;  // those used so far, for the fill at each block and the fault report

inline char* slot_storage(Slot& s) {
    if (s.run != run_id) {
        if (s.mem.lo == nullptr) {
            s.mem = map_guarded(s.bytes, kSharedGuard);
            slots.push_back(&s);
        }
        s.start = place(s.mem, s.bytes, s.align, 0, run_at_end);
        s.run = run_id;
        std::memset(s.start, run_fill, s.bytes);
    }
    return s.start;
}

template <class A> struct SharedSlot : Slot {
    using E = std::remove_all_extents_t<A>;
    constexpr explicit SharedSlot(const char* name) : Slot{name, dtype_name<E>(), sizeof(A), sizeof(E), alignof(E)} {}
    A& array() { return *reinterpret_cast<A*>(slot_storage(*this)); }
};

inline void fill_shared() {  // a block starts: its __shared__ memory holds no earlier block's values
    for (Slot* s : slots)
        if (s->run == run_id) std::memset(s->start, run_fill, s->bytes);
}

// ---- fibers ------------------------------------------------------------------------------

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
    std::source_location site;  // the __syncthreads() it waits at
};

inline Fiber* running = nullptr;  // set only while a fiber runs
inline void (*body)(void*) = nullptr;  // the kernel call of the current launch
inline void* body_arg = nullptr;

constexpr std::size_t kStack = 256 * 1024;
constexpr std::size_t kStackGuard = 64 * 1024;  // below each stack: an overflow faults
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
// call. A launch switches once per thread per barrier per order; with swapcontext that was most of
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

[[noreturn]] inline void abandon_fiber() {  // from the fault handler: the fiber is never resumed
    void* dead;
    cuda_cpu_switch(&dead, scheduler_sp);
    __builtin_unreachable();
}
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

[[noreturn]] inline void abandon_fiber() {
    setcontext(&scheduler);
    __builtin_unreachable();
}
#endif

inline void barrier(const std::source_location& site) {
    running->site = site;
    yield_to_scheduler();
}

// ---- faults ------------------------------------------------------------------------------

struct Fault {
    int signal = 0;  // 0: none
    const char* address;
    uint3 thread, block;
};
inline Fault fault;

inline struct sigaction saved_actions[3];
constexpr int kSignals[3] = {SIGSEGV, SIGBUS, SIGFPE};
inline stack_t saved_altstack;
constexpr std::size_t kAltStack = 64 * 1024;
inline char* altstack = nullptr;  // the handler runs here, so a fiber that overflowed its stack is reported too

inline void on_fault(int sig, siginfo_t* info, void*) {
    if (running == nullptr) {  // not kernel code: the handler that was there before takes it
        for (int i = 0; i < 3; ++i)
            if (kSignals[i] == sig) sigaction(sig, &saved_actions[i], nullptr);
        return;  // the instruction faults again, under that handler
    }
    fault = {sig, static_cast<const char*>(info->si_addr), running->idx, block_idx};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // the handler is left, never returned from
    abandon_fiber();
}

inline void install_fault_handler() {
    if (altstack == nullptr) altstack = static_cast<char*>(std::malloc(kAltStack));
    stack_t ss{};
    ss.ss_sp = altstack;
    ss.ss_size = kAltStack;
    sigaltstack(&ss, &saved_altstack);
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &saved_actions[i]);
    fault = {};
}

inline void remove_fault_handler() {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &saved_actions[i], nullptr);
    sigaltstack(&saved_altstack, nullptr);
}

// ---- one launch --------------------------------------------------------------------------

// The arguments that point into one piece of memory: one array, or several that overlap (one
// copy keeps their aliasing).
struct Span {
    char* orig;
    std::size_t bytes;
    bool writable;
    std::vector<std::size_t> params;
    Guarded mem, ref_mem;  // this run's copy; the first run's, kept to compare and to copy back
    char* copy = nullptr;
    char* ref = nullptr;
};

struct Order {
    long long kind;  // 0 ascending, 1 descending, 2 shuffled
    unsigned long long seed;
};

inline const char* order_name(const Order& o, char* buf, std::size_t size) {
    if (o.kind == 0) return "ascending";
    if (o.kind == 1) return "descending";
    std::snprintf(buf, size, "shuffled:%llu", o.seed);
    return buf;
}

struct Rng {  // splitmix64: a seed gives the same shuffles on every machine
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
};

template <class I> void arrange(std::vector<I>& v, const Order& o, Rng& rng) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<I>(i);
    if (o.kind == 1) std::reverse(v.begin(), v.end());
    if (o.kind == 2)
        for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.next() % i]);
}

inline const char* base_name(const char* path) {
    const char* slash = std::strrchr(path, '/');
    return slash ? slash + 1 : path;
}

inline bool same_site(const std::source_location& a, const std::source_location& b) {
    return a.line() == b.line() && a.column() == b.column() &&
           (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

// One block, its threads resumed round by round in `order` until all have returned. False
// with launch_error set (or `fault` for a fault) when the threads do not meet at barriers.
inline bool run_block(std::vector<Fiber>& fibers, const Order& order, Rng& rng, std::vector<unsigned>& turn) {
    const unsigned int n = static_cast<unsigned int>(fibers.size());
    for (unsigned int t = 0; t < n; ++t) {
        Fiber& f = fibers[t];
        f.idx = {t % block_dim.x, (t / block_dim.x) % block_dim.y, t / (block_dim.x * block_dim.y)};
        f.done = false;
        start_fiber(f, stack_for(t));
    }
    const uint3 b = block_idx;
    for (unsigned int live = n; live > 0;) {  // one barrier round per pass
        if (order.kind == 2 || live == n) arrange(turn, order, rng);
        unsigned int finished = 0;
        const Fiber* waiting = nullptr;
        for (unsigned int t : turn) {
            Fiber& f = fibers[t];
            if (f.done) continue;
            resume(f);
            if (fault.signal) return false;
            if (f.done) {
                ++finished;
            } else if (waiting == nullptr) {
                waiting = &f;
            } else if (!same_site(waiting->site, f.site)) {
                const Fiber& w = *waiting;
                return fail("block (%u,%u,%u): thread (%u,%u,%u) waits at __syncthreads() at %s:%u and thread "
                            "(%u,%u,%u) at the one at %s:%u (a divergent barrier: undefined behaviour in CUDA, a hang "
                            "or garbage on a GPU); make every thread of the block reach the same __syncthreads() "
                            "calls, e.g. by moving them out of conditional code",
                            b.x, b.y, b.z, w.idx.x, w.idx.y, w.idx.z, base_name(w.site.file_name()), w.site.line(),
                            f.idx.x, f.idx.y, f.idx.z, base_name(f.site.file_name()), f.site.line());
            }
        }
        if (finished != 0 && finished != live)  // the waiting fibers are abandoned
            return fail("block (%u,%u,%u): %u of %u threads returned while the others wait at __syncthreads() "
                        "(%s:%u) (a divergent barrier: undefined behaviour in CUDA, a hang or garbage on a GPU); "
                        "make every thread of the block reach the same __syncthreads() calls",
                        b.x, b.y, b.z, finished, live, base_name(waiting->site.file_name()), waiting->site.line());
        live -= finished;
    }
    return true;
}

inline bool run_grid(dim3 grid, dim3 block, const Order& order) {
    grid_dim = grid;
    block_dim = block;
    const unsigned int n = block.x * block.y * block.z;
    const unsigned long long blocks = 1ULL * grid.x * grid.y * grid.z;
    std::vector<Fiber> fibers(n);
    std::vector<unsigned> turn(n);
    Rng rng{order.seed};
    std::vector<unsigned long long> sequence;
    if (order.kind == 2) {
        sequence.resize(blocks);
        arrange(sequence, order, rng);
    }
    for (unsigned long long i = 0; i < blocks; ++i) {
        const unsigned long long k = order.kind == 0 ? i : order.kind == 1 ? blocks - 1 - i : sequence[i];
        block_idx = {static_cast<unsigned>(k % grid.x), static_cast<unsigned>(k / grid.x % grid.y),
                     static_cast<unsigned>(k / (1ULL * grid.x * grid.y))};
        fill_shared();
        if (!run_block(fibers, order, rng, turn)) return false;
    }
    return true;
}

inline const char* param_name(const char* const* names, std::size_t i, char* buf, std::size_t size) {
    if (names[i] && names[i][0]) return names[i];
    std::snprintf(buf, size, "argument %zu", i);
    return buf;
}

// The argument of `span` nearest to `address` in this run's copy, and the element it names.
inline std::size_t nearest_param(const Span& s, const long long* sizes, void** args, const Param* params,
                                 const char* address, long long& element) {
    std::size_t best = s.params[0];
    long long best_distance = LLONG_MAX;
    for (std::size_t i : s.params) {
        const char* start = s.copy + (*static_cast<char**>(args[i]) - s.orig);
        const long long off = address - start;
        const long long distance = off < 0 ? -off : off >= sizes[i] ? off - sizes[i] + 1 : 0;
        if (distance < best_distance) {
            best_distance = distance;
            best = i;
            const long long size = static_cast<long long>(params[i].itemsize);
            element = off >= 0 ? off / size : -((-off + size - 1) / size);
        }
    }
    return best;
}

inline bool describe_fault(const std::vector<Span>& spans, const long long* sizes, void** args,
                           const char* const* names, const Param* params) {
    const Fault& f = fault;
    char who[128], buf[64];
    std::snprintf(who, sizeof who, "thread (%u,%u,%u) of block (%u,%u,%u)", f.thread.x, f.thread.y, f.thread.z,
                  f.block.x, f.block.y, f.block.z);
    if (f.signal == SIGFPE)
        return fail("%s divided an integer by zero (a GPU gives an unspecified value, no error): check the divisor",
                    who);
    const unsigned int threads = block_dim.x * block_dim.y * block_dim.z;
    for (const Slot* s : slots) {
        if (!s->mem.near(f.address) || s->run != run_id) continue;
        const long long off = f.address - s->start, size = static_cast<long long>(s->itemsize);
        const long long element = off >= 0 ? off / size : -((-off + size - 1) / size);
        const long long n = static_cast<long long>(s->bytes / s->itemsize);
        if (element >= n && threads > n)
            return fail("%s accessed element %lld of __shared__ %s (%s[%lld]), past its end: the block has %u threads, "
                        "more than %s holds; launch at most %lld threads per block (and declare "
                        "__launch_bounds__(%lld) so that a GPU refuses a larger block too)",
                        who, element, s->name, s->dtype, n, threads, s->name, n, n);
        return fail("%s accessed element %lld of __shared__ %s (%s[%lld]), %s; check the index", who, element, s->name,
                    s->dtype, n, element < 0 ? "before its start" : "past its end");
    }
    for (const Span& s : spans) {
        if (!s.mem.near(f.address)) continue;
        long long element = 0;
        const std::size_t i = nearest_param(s, sizes, args, params, f.address, element);
        const long long n = sizes[i] / static_cast<long long>(params[i].itemsize);
        const char* name = param_name(names, i, buf, sizeof buf);
        return fail("%s accessed %s[%lld], %s of the array passed as argument %zu (%s: %s, %lld elements); check the "
                    "index against the array's size, or pass a larger array",
                    who, name, element, element < 0 ? "before the start" : "past the end", i, name, params[i].dtype, n);
    }
    for (const char* stack : stacks)
        if (f.address < stack && f.address >= stack - kStackGuard)
            return fail("%s overflowed its %zu KiB stack (deep recursion or large local arrays)", who, kStack / 1024);
    // an index computed in unsigned int that went below 0 (threadIdx.x - 1) lands 2**32 - k
    // elements past the array's start, far from its guards
    auto wrapped = [&](const char* start, std::size_t itemsize, long long& index) {
        const long long off = f.address - start, size = static_cast<long long>(itemsize);
        const long long element = off / size;
        index = element - (1LL << 32);
        return off % size == 0 && index < 0 && index >= -(1LL << 24);
    };
    long long index = 0;
    for (const Slot* s : slots)
        if (s->run == run_id && wrapped(s->start, s->itemsize, index))
            return fail("%s accessed element %lld of __shared__ %s (%s[%lld]): the index %lld, computed in unsigned "
                        "arithmetic, wrapped around; compute it in a signed type (int t = threadIdx.x) and check it",
                        who, index + (1LL << 32), s->name, s->dtype, static_cast<long long>(s->bytes / s->itemsize),
                        index);
    for (const Span& s : spans)
        for (std::size_t i : s.params)
            if (wrapped(s.copy + (*static_cast<char**>(args[i]) - s.orig), params[i].itemsize, index)) {
                const char* name = param_name(names, i, buf, sizeof buf);
                return fail("%s accessed %s[%lld] (argument %zu, %s, %lld elements): the index %lld, computed in "
                            "unsigned arithmetic, wrapped around; compute it in a signed type and check it",
                            who, name, index + (1LL << 32), i, params[i].dtype,
                            sizes[i] / static_cast<long long>(params[i].itemsize), index);
            }
    return fail("%s made an invalid memory access at address %p, far from every array argument and __shared__ "
                "array (a null or wrong pointer; address 0 also stands for a misaligned vector access)",
                who, static_cast<const void*>(f.address));
}

// The byte that fills the alignment padding next to span `i`'s copy in run `r`: another for
// each array, so a kernel that copies one array's padding into another's is still seen
// writing there, and another for each run, so a read of the padding changes the result.
inline unsigned char padding_byte(std::size_t i, int r) { return static_cast<unsigned char>(0xC1 + 2 * i + 64 * r); }

inline bool check_padding(const std::vector<Span>& spans, int r, const long long* sizes, void** args,
                          const char* const* names, const Param* params) {
    for (std::size_t k = 0; k < spans.size(); ++k) {
        const Span& s = spans[k];
        for (const char* p = s.mem.lo; p < s.mem.hi; ++p) {
            if (p == s.copy) p += s.bytes;
            if (p >= s.mem.hi || static_cast<unsigned char>(*p) == padding_byte(k, r)) continue;
            long long element = 0;
            char buf[64];
            const std::size_t i = nearest_param(s, sizes, args, params, p, element);
            const char* name = param_name(names, i, buf, sizeof buf);
            return fail("a thread wrote %s[%lld], %s of the array passed as argument %zu (%s: %s, %lld elements), "
                        "within the alignment padding next to it, so the thread is not known; check the index against "
                        "the array's size",
                        name, element, element < 0 ? "before the start" : "past the end", i, name, params[i].dtype,
                        sizes[i] / static_cast<long long>(params[i].itemsize));
        }
    }
    return true;
}

inline void format_value(char* buf, std::size_t size, const char* p, const char* dtype) {
    auto get = [p](auto v) { std::memcpy(&v, p, sizeof v); return v; };
    if (!std::strcmp(dtype, "float32")) std::snprintf(buf, size, "%.9g", static_cast<double>(get(float{})));
    else if (!std::strcmp(dtype, "float64")) std::snprintf(buf, size, "%.17g", get(double{}));
    else if (!std::strcmp(dtype, "bool")) std::snprintf(buf, size, "%s", get(bool{}) ? "true" : "false");
    else if (!std::strcmp(dtype, "int8")) std::snprintf(buf, size, "%d", get(std::int8_t{}));
    else if (!std::strcmp(dtype, "uint8")) std::snprintf(buf, size, "%u", get(std::uint8_t{}));
    else if (!std::strcmp(dtype, "int16")) std::snprintf(buf, size, "%d", get(std::int16_t{}));
    else if (!std::strcmp(dtype, "uint16")) std::snprintf(buf, size, "%u", get(std::uint16_t{}));
    else if (!std::strcmp(dtype, "int32")) std::snprintf(buf, size, "%d", get(std::int32_t{}));
    else if (!std::strcmp(dtype, "uint32")) std::snprintf(buf, size, "%u", get(std::uint32_t{}));
    else if (!std::strcmp(dtype, "int64")) std::snprintf(buf, size, "%lld", static_cast<long long>(get(std::int64_t{})));
    else if (!std::strcmp(dtype, "uint64"))
        std::snprintf(buf, size, "%llu", static_cast<unsigned long long>(get(std::uint64_t{})));
    else std::snprintf(buf, size, "(byte 0x%02x)", static_cast<unsigned char>(*p));
}

// This run's writable copies against the first run's: the first element that differs, if any.
inline bool compare_runs(const std::vector<Span>& spans, const long long* sizes, void** args,
                         const char* const* names, const Param* params, const Order& first, const Order& now) {
    for (const Span& s : spans) {
        if (!s.writable || std::memcmp(s.ref, s.copy, s.bytes) == 0) continue;
        std::size_t off = 0;
        while (s.ref[off] == s.copy[off]) ++off;
        long long element = 0;
        const std::size_t i = nearest_param(s, sizes, args, params, s.copy + off, element);
        const char* start = s.copy + (*static_cast<char**>(args[i]) - s.orig);
        const std::size_t at = static_cast<std::size_t>(element) * params[i].itemsize;
        char a[64], b[64], buf[64], o1[40], o2[40];
        format_value(a, sizeof a, s.ref + (start - s.copy) + at, params[i].dtype);
        format_value(b, sizeof b, start + at, params[i].dtype);
        const char* name = param_name(names, i, buf, sizeof buf);
        return fail("the result depends on the order the threads run in between __syncthreads() barriers (and the "
                    "blocks in the grid): %s[%lld] is %s under the %s order and %s under the %s order. A thread reads "
                    "or writes memory that another thread of the launch writes with no barrier between them (a race: "
                    "on a GPU the result changes from run to run); or it reads __shared__ memory that no thread of its "
                    "block wrote, or reads just past the end of an array (within the padding that keeps its "
                    "alignment), which hold other bytes in each run. Add the missing __syncthreads(), let each thread "
                    "write only its own elements, or check the index",
                    name, element, a, order_name(first, o1, sizeof o1), b, order_name(now, o2, sizeof o2));
    }
    return true;
}

template <class... A, std::size_t... I>
void invoke(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
    kernel(*static_cast<std::remove_cv_t<A>*>(args[I])...);
}

template <class... A> struct Call {
    void (*kernel)(A...);
    void** args;
    static void run(void* self) {
        auto* c = static_cast<Call*>(self);
        invoke(c->kernel, c->args, std::index_sequence_for<A...>{});
    }
};

constexpr unsigned char kFill[4] = {0xFF, 0x00, 0x7F, 0xA5};  // NaN, 0, 3.4e38, -2.9e-16 as float32

// Launch <<<grid, block>>> once per order. dims: grid then block; sizes: the bytes of each
// array argument (-1 for a scalar); names: the parameters' names for messages; orders: kind
// and seed pairs. The caller's arrays receive the first run's results, and only when every
// run agreed.
template <class... A>
void launch(void (*kernel)(A...), const unsigned* dims, void** args, const long long* sizes,
            const char* const* names, const long long* orders, int n_orders) {
    constexpr std::size_t N = sizeof...(A);
    const std::array<Param, N> params{param_of<A>()...};
    launch_error[0] = '\0';

    std::vector<std::size_t> arrays;  // by address, to find the ones that overlap
    for (std::size_t i = 0; i < N; ++i)
        if (params[i].pointer) arrays.push_back(i);
    auto address = [args](std::size_t i) { return *static_cast<char**>(args[i]); };
    std::sort(arrays.begin(), arrays.end(), [&](std::size_t a, std::size_t b) { return address(a) < address(b); });
    std::vector<Span> spans;
    for (std::size_t i : arrays) {
        char* p = address(i);
        const std::size_t bytes = static_cast<std::size_t>(sizes[i]);
        Span* last = spans.empty() ? nullptr : &spans.back();
        if (last && bytes && last->bytes && p < last->orig + last->bytes) {
            last->bytes = std::max(last->bytes, static_cast<std::size_t>(p + bytes - last->orig));
            last->writable |= params[i].writable;
            last->params.push_back(i);
        } else {
            spans.push_back({p, bytes, params[i].writable, {i}, {}, {}});
        }
    }

    std::array<void*, N> pointers{};
    std::array<void*, N> run_args{};
    Call<A...> call{kernel, run_args.data()};
    body = &Call<A...>::run;
    body_arg = &call;
    const dim3 grid{dims[0], dims[1], dims[2]}, block{dims[3], dims[4], dims[5]};

    install_fault_handler();
    bool ok = true;
    const Order first{orders[0], static_cast<unsigned long long>(orders[1])};
    for (int r = 0; r < n_orders && ok; ++r) {
        const Order order{orders[2 * r], static_cast<unsigned long long>(orders[2 * r + 1])};
        ++run_id;
        run_at_end = r % 2 == 0;
        run_fill = kFill[r % 4];
        for (std::size_t k = 0; k < spans.size(); ++k) {
            Span& s = spans[k];
            s.mem = map_guarded(s.bytes + (s.bytes ? 15 : 0), kGuard);
            s.copy = place(s.mem, s.bytes, 16, reinterpret_cast<std::uintptr_t>(s.orig) % 16, run_at_end);
            if (s.bytes) {
                std::memset(s.mem.lo, padding_byte(k, r), static_cast<std::size_t>(s.copy - s.mem.lo));
                std::memcpy(s.copy, s.orig, s.bytes);
                std::memset(s.copy + s.bytes, padding_byte(k, r), static_cast<std::size_t>(s.mem.hi - s.copy) - s.bytes);
            }
        }
        for (std::size_t i = 0; i < N; ++i) run_args[i] = args[i];
        for (const Span& s : spans)
            for (std::size_t i : s.params) {
                pointers[i] = s.copy + (address(i) - s.orig);
                run_args[i] = &pointers[i];
            }
        ok = run_grid(grid, block, order);
        if (!ok && fault.signal) describe_fault(spans, sizes, args, names, params.data());
        ok = ok && check_padding(spans, r, sizes, args, names, params.data());
        if (ok && r > 0) ok = compare_runs(spans, sizes, args, names, params.data(), first, order);
        for (Span& s : spans) {
            if (r == 0) {
                s.ref_mem = s.mem;
                s.ref = s.copy;
                s.mem = {};
            } else {
                unmap_guarded(s.mem);
            }
        }
    }
    remove_fault_handler();
    for (Span& s : spans) {
        if (ok && s.writable && s.bytes) std::memcpy(s.orig, s.ref, s.bytes);
        unmap_guarded(s.mem);
        unmap_guarded(s.ref_mem);
    }
}

}  // namespace cuda_cpu
