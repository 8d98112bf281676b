#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "cyan/common/cache_line.h"
#include "cyan/common/noncopyable.h"
#include "cyan/dispatch/detail/destroy_task.h"
#include "cyan/dispatch/detail/inbox_lane.h"
#include "cyan/dispatch/detail/producer_cache.h"
#include "cyan/lockfree/queue.h"

namespace cyan::dispatch::detail {

/// A closure that can be posted: called as an lvalue, its result ignored. (The lvalue reference
/// is spelled add_lvalue_reference_t: clang-format splits `std::decay_t<F>&>` apart.)
template <typename F>
concept postable = std::invocable<std::add_lvalue_reference_t<std::decay_t<F>>>;

/// A closure that can be posted as an awaitable task: called once, as an rvalue.
template <typename F>
concept awaitable_callable = std::invocable<std::decay_t<F>>;

/// What the thread behind an inbox provides to it. [consumer] unless marked.
class inbox_owner {
 public:
  /// Wakes the thread from its loop. [any thread]
  virtual void wake_thread() noexcept = 0;
  /// Receives what a task threw.
  virtual void report(std::exception& error) noexcept = 0;
  /// Takes a delayed task: it must later go to inbox::run_task() or inbox::cancel_task().
  virtual void schedule(std::chrono::steady_clock::time_point due, inbox_task task) = 0;
  /// Whether work may still be handed over (inbox::post_handed_over()) from work accepted
  /// before stop(): a stopped thread keeps serving its inbox until this is false, and it must
  /// stay false once it was seen false after stop(). Reads with seq_cst loads; whoever makes
  /// it false after stop() calls notify() (see "Stop").
  [[nodiscard]] virtual bool expecting_hand_overs() const noexcept = 0;

 protected:
  ~inbox_owner() = default;
};

/// A handler thread's inbox: any thread posts tasks, the inbox's one thread runs them.
///
/// Lanes. A thread's first kPromoteAfter posts to an inbox go through a shared Michael–Scott queue
/// (any producer, one allocation per post). After that the thread gets its own lane, an unbounded
/// SPSC queue (inbox_lane over lockfree::spsc_queue) found through a thread-local cache: a post is
/// then one table lookup, a flag store, one load and a ring push: no CAS, no hardware fence, no
/// allocation for a closure that fits inline, no syscall while the consumer is awake. The lane is
/// announced by an open_lane envelope sent through the shared queue *after* the thread's earlier
/// shared posts, and the consumer starts reading a lane only when it reaches that envelope, so
/// posts stay FIFO per producer across the switch. Delayed posts always use the shared queue. A
/// thread's lanes are closed when it exits, after its C++ thread_local destructors ran (a pthread
/// key destructor, producer_cache.cpp), so those destructors may still post; posts made even later
/// (from other libraries' key destructors) go through the shared queue and are not ordered after
/// that thread's lane posts. The consumer frees a closed lane once it is empty.
///
/// No lost wake-up. state_ holds kSleeping, set by the consumer before it blocks in its loop.
///   producer: active = true ; light fence ; s = state_ ; push ; if s has kSleeping: wake ;
///             active = false (release)
///   consumer: state_ |= kSleeping (seq_cst RMW) ; heavy fence ; if some lane is active or
///             non-empty, or the shared queue is: clear kSleeping and keep running ;
///             else block in the loop
/// (the shared queue's producers use shared_active_, a seq_cst RMW counter, instead of
/// `active`). The fences are asymmetric_fence's: a compiler barrier for the producer, a
/// process-wide membarrier for the consumer (or, without membarrier, seq_cst on both sides);
/// either way "the producer's load misses kSleeping and the consumer's load misses
/// active == true" cannot both happen. If the producer's load misses kSleeping, the consumer
/// sees active == true (it keeps running), or the release store active = false that follows
/// the push (so the task is visible and it keeps running). Otherwise the producer saw
/// kSleeping and wakes the thread. So a post that finds the consumer awake costs no syscall and
/// no hardware fence, and a sleeping consumer is always woken.
///
/// Naps. The heavy fence interrupts every other running thread of the process (in a virtual
/// machine each interrupt is a VM exit; docs/bench/notes.md has the cost), too much to pay
/// each time a thread runs out of work between two messages. So the consumer first
/// announces with the light fence only and blocks for a bounded nap: a post that raced with
/// the announcement (its `active` store still in its CPU's store buffer while the consumer
/// looked) is then found when the nap ends, no later. Only a consumer whose nap ended with
/// nothing to do announces again with the heavy fence and blocks without a bound.
///
/// Stop. stop() sets kStopped with a seq_cst RMW; producers check it with the same load, so a
/// post either sees it and throws executor_stopped (nothing pushed), or had set `active` before
/// the load, and finish() below sees its task (the same argument, with kStopped in place of
/// kSleeping). Between the two the consumer goes on serving, and sleeping, as before while its
/// owner is expecting_hand_overs(): work accepted before the stop (a serial_token's next task)
/// may still arrive, through post_handed_over(), which kStopped does not refuse. Meanwhile the
/// sleep check counts the stop as work only once expecting_hand_overs() is false, and whoever
/// makes it false does so with a seq_cst RMW and then calls notify() (a seq_cst load of
/// kSleeping): the "No lost wake-up" argument again. Then finish() sets kClosed with a seq_cst
/// RMW and, after a heavy fence, waits until no lane is active and empties everything: a
/// hand-over either sees kClosed and throws (the owner's accounting rules that out) or is seen
/// by finish(), like a post that missed kStopped. So no accepted task is stranded, and every
/// plain post after stop() returns throws.
///
/// Wake-ups. The wake itself (a syscall) happens after the window closed, so that a consumer
/// woken by it never waits for its waker to leave the window (a waker preempted inside the
/// syscall would otherwise keep the woken thread spinning until the scheduler ran the waker
/// again). The waker object's lifetime is kept by wakers_, incremented inside the window (or
/// before stop()'s RMW) and decremented after the wake; finish() waits for it to drop to zero
/// before the thread destroys the waker.
class inbox : noncopyable {
 public:
  using clock = std::chrono::steady_clock;

  /// Posts through the shared queue before a thread gets its own lane.
  static constexpr std::uint32_t kPromoteAfter = 16;

  inbox();
  /// Frees the lanes (the thread must have finished) and tells their producers it is gone.
  ~inbox();

  /// The unique id the producers' caches know this inbox by (never reused). [any thread]
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

  // ---- producer side [any thread] -----------------------------------------------------------

  /// Queues a task built from `f`. Throws executor_stopped after stop(), or what building the
  /// task throws; nothing is queued then.
  template <typename F>
  void post(F&& f) {
    post_unless<kStopped>(std::forward<F>(f));
  }

  /// post() for work accepted before stop() and handed over only now (a serial_token's step):
  /// accepted after stop() too, until finish() closes the inbox (see "Stop"); after that it
  /// throws executor_stopped, nothing queued.
  template <typename F>
  void post_handed_over(F&& f) {
    post_unless<kClosed>(std::forward<F>(f));
  }

  /// Queues `task` to be handed to the owner's schedule() for `due`. Throws like post().
  void post_delayed(inbox_task task, clock::time_point due) {
    post_shared(kStopped, envelope::kind::delayed, std::move(task), due);
  }

  /// Creates this thread's lane and announces it to the consumer. Throws executor_stopped once
  /// finish() closed the inbox (a lane opened after stop() serves hand-overs), std::bad_alloc.
  /// [producer: called by the thread cache]
  inbox_lane* open_lane();

  /// Refuses new posts and wakes the thread; `discard` also cancels queued tasks. Never throws.
  void stop(bool discard) noexcept;

  /// Wakes the thread if it sleeps: for producers that fed an idle_hook's source (see
  /// idle_hook.h), and for whoever ended expecting_hand_overs() (see "Stop"). Never throws.
  void notify() noexcept;

  /// notify() if stop() was called, for callers that end expecting_hand_overs() often but
  /// matter only after a stop. Reads kStopped with a seq_cst load (see "Stop"). Never throws.
  void notify_if_stopped() noexcept {
    if ((state_.value.load(std::memory_order_seq_cst) & kStopped) != 0) {
      notify();
    }
  }

  /// Throws executor_stopped after stop(): for callers that queue work elsewhere first (a
  /// serial_token's queue) and hand it over later. A seq_cst load, for the owner's accounting of
  /// such callers (see expecting_hand_overs()).
  void throw_if_stopped() const {
    if ((state_.value.load(std::memory_order_seq_cst) & kStopped) != 0) {
      throw_stopped();
    }
  }

  [[nodiscard]] bool stopped() const noexcept { return (load_state() & kStopped) != 0; }
  [[nodiscard]] bool finished() const noexcept { return (load_state() & kFinished) != 0; }

  /// posted, executed, cancelled (queued is derived by the caller), and the lanes not retired.
  struct counters {
    std::uint64_t posted = 0;
    std::uint64_t executed = 0;
    std::uint64_t cancelled = 0;
    std::uint64_t lanes = 0;
    std::uint64_t sleeps = 0;
    std::uint64_t naps = 0;
    std::uint64_t dear_fences = 0;
  };
  [[nodiscard]] counters read_counters() const;

  // ---- consumer side [consumer] -------------------------------------------------------------

  /// Binds the consumer. Before any drain.
  void attach(inbox_owner& owner) noexcept { owner_ = &owner; }

  /// One round: up to `budget` tasks from the shared queue, then up to `budget` from each lane.
  /// Returns how many entries it took (tasks run or cancelled, envelopes handled).
  std::size_t drain(std::size_t budget) noexcept;

  /// Whether the thread should leave its loop for finish(): stop() was called and the owner
  /// expects no more hand-overs. [consumer]
  [[nodiscard]] bool ready_to_finish() const noexcept { return stop_is_due(load_state()); }

  /// A cheap, relaxed look for queued work or a due stop, for spinning. [consumer]
  [[nodiscard]] bool looks_busy() const noexcept;

  /// What prepare_sleep() found.
  enum class sleep_check {
    may_sleep,      ///< nothing to do: sleep (the announcement stands)
    work,           ///< work or a stop arrived: run it
    producer_busy,  ///< only a post in progress: let its thread run (yield), then look again
  };

  /// How prepare_sleep() orders the announcement before its looks (see "Naps").
  enum class sleep_fence {
    light,  ///< no fence: may miss a racing post, so the sleep that follows must be bounded
    heavy,  ///< asymmetric_fence::heavy(): no post is missed, the sleep may be unbounded
  };

  /// Announces that the thread is about to sleep, and withdraws the announcement unless it
  /// returns may_sleep: see "No lost wake-up". `extra_work` is checked in the same window (the
  /// idle_hook's source). With a heavy fence and `fence_took`, stores how long the fence took.
  [[nodiscard]] sleep_check prepare_sleep(bool (*extra_work)(void*) noexcept, void* context,
                                          sleep_fence fence,
                                          clock::duration* fence_took = nullptr) noexcept;

  /// After the thread woke up (by a wake or anything else).
  void woke() noexcept;

  /// Counts a sleep the thread made (after may_sleep), and whether it was a nap. [consumer]
  void count_sleep(bool nap) noexcept {
    // relaxed: diagnostics for stats(); only the consumer writes them.
    sleeps_.store(sleeps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (nap) {
      naps_.store(naps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
  }

  /// Counts a timed heavy fence that was dear (see idle_policy::fence_timed()). [consumer]
  void count_dear_fence() noexcept {
    dear_fences_.store(dear_fences_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// After ready_to_finish(): closes the inbox to hand-overs, waits out in-flight posts and
  /// runs (drain) or cancels (discard) everything queued, so that nothing accepted is left
  /// behind. Delayed tasks go to the owner's schedule() as usual; the owner decides their fate.
  void finish() noexcept;

  /// Marks the thread finished (is_running() false). After finish().
  void mark_finished() noexcept;

  /// Whether tasks are being discarded (stop(discard) was called).
  [[nodiscard]] bool discarding() const noexcept { return (load_state() & kDiscard) != 0; }

  /// Runs `task`, counting it, then destroys it (leaving it empty); reports what it or its
  /// destructor throws.
  void run_task(inbox_task& task) noexcept {
    // release: pairs with the acquire load in read_counters().
    executed_.store(executed_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    try {
      task();
    } catch (std::exception& error) {
      owner_->report(error);
    } catch (...) {
      report_unknown();
    }
    destroy(task);
  }

  /// Destroys `task` unrun (an awaitable reports task_cancelled), counting it; reports what its
  /// destructor throws.
  void cancel_task(inbox_task& task) noexcept {
    destroy(task);
    // release: pairs with the acquire load in read_counters().
    cancelled_.store(cancelled_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  /// Gives the owner what a task or a task's destructor threw (anything not a std::exception as
  /// std::runtime_error("unknown exception")).
  void report(std::exception_ptr error) noexcept;

 private:
  static constexpr std::uint32_t kSleeping = 1;  // the consumer is (about to be) blocked
  static constexpr std::uint32_t kStopped = 2;   // stop() was called: posts are refused
  static constexpr std::uint32_t kDiscard = 4;   // stop(discard): queued tasks are cancelled
  static constexpr std::uint32_t kFinished = 8;  // the thread has finished
  static constexpr std::uint32_t kClosed = 16;   // finish() began: hand-overs are refused too

  struct envelope {
    enum class kind : std::uint8_t { task, delayed, open_lane };
    inbox_task task;
    clock::time_point due{};
    inbox_lane* lane = nullptr;
    kind what = kind::task;
  };

  // Marks a lane's post in progress for its whole scope, exceptions included.
  class active_window {
   public:
    explicit active_window(inbox_lane& lane) noexcept : lane_(lane) { lane_.begin_post(); }
    ~active_window() { lane_.end_post(); }
    active_window(const active_window&) = delete;
    active_window& operator=(const active_window&) = delete;

   private:
    inbox_lane& lane_;
  };

  // The same for the shared queue and for notify().
  class shared_window {
   public:
    explicit shared_window(inbox& target) noexcept;
    ~shared_window();
    shared_window(const shared_window&) = delete;
    shared_window& operator=(const shared_window&) = delete;

   private:
    inbox& target_;
  };

  [[nodiscard]] std::uint32_t load_state() const noexcept {
    // acquire: pairs with the seq_cst RMWs in stop() and mark_finished().
    return state_.value.load(std::memory_order_acquire);
  }

  // A post, refused when state_ has kRefused: kStopped for a post, kClosed for a hand-over.
  template <std::uint32_t kRefused, typename F>
  [[gnu::always_inline]] void post_unless(F&& f) {
    inbox_lane* lane = find_hot_lane(id_);
    if (lane == nullptr) [[unlikely]] {
      post_cold<kRefused>(std::forward<F>(f));
      return;
    }
    post_to<kRefused>(*lane, std::forward<F>(f));
  }

  // The fast path: this thread's lane is known.
  template <std::uint32_t kRefused, typename F>
  [[gnu::always_inline]] void post_to(inbox_lane& lane, F&& f) {
    std::uint32_t state;
    {
      const active_window window(lane);
      state = state_.value.load(std::memory_order_seq_cst);  // see "No lost wake-up"
      if ((state & kRefused) != 0) {
        throw_refused(kRefused);
      }
      lane.push(std::forward<F>(f));
      if ((state & kSleeping) != 0) {
        begin_wake();  // before the window closes, see "Wake-ups"
      }
    }
    if ((state & kSleeping) != 0) {
      end_wake();
    }
  }

  // The lane is not in the hot cache: look it up (maybe open it), or use the shared queue.
  template <std::uint32_t kRefused, typename F>
  [[gnu::noinline]] void post_cold(F&& f) {
    inbox_lane* lane = find_lane(*this);
    if (lane == nullptr) {
      post_shared(kRefused, envelope::kind::task, inbox_task(std::forward<F>(f)));
    } else {
      post_to<kRefused>(*lane, std::forward<F>(f));
    }
  }

  void post_shared(std::uint32_t refused, envelope::kind what, inbox_task task,
                   clock::time_point due = {}, inbox_lane* lane = nullptr);
  void push_shared(envelope&& item);
  [[noreturn]] static void throw_stopped();
  // Every task the inbox ran or cancels is destroyed here, before its slot or envelope is reused.
  void destroy(inbox_task& task) noexcept {
    destroy_task(task, [this](std::exception_ptr error) { report(std::move(error)); });
  }
  [[noreturn]] static void throw_refused(std::uint32_t refused);
  void wake() noexcept;
  void begin_wake() noexcept;
  void end_wake() noexcept;
  void report_unknown() noexcept;

  // consumer helpers (inbox.cpp)
  [[nodiscard]] bool stop_is_due(std::uint32_t state) const noexcept {
    return (state & kStopped) != 0 && !owner_->expecting_hand_overs();
  }
  std::size_t drain_shared(std::size_t budget) noexcept;
  std::size_t drain_lanes(std::size_t budget) noexcept;
  void handle(envelope& item) noexcept;
  void take_task(inbox_task& task) noexcept;
  void retire(inbox_lane* lane) noexcept;
  void wait_for_wakers() const noexcept;
  [[nodiscard]] bool anything_active() const noexcept;
  [[nodiscard]] bool anything_queued() const noexcept;

  const std::uint64_t id_;
  // The consumer's lanes, linked through inbox_lane::next_lane: consumer-only.
  inbox_lane* lanes_ = nullptr;
  // Shared envelopes taken so far, compared with shared_pushed_ to skip an empty queue cheaply.
  std::uint64_t shared_popped_ = 0;
  // Set by attach() before any post can see kSleeping; read by wake().
  inbox_owner* owner_ = nullptr;

  // Read by every post; written by the consumer (sleep/wake), stop() and wakers.
  cache_padded<std::atomic<std::uint32_t>> state_;

  // Written only by the consumer; read by read_counters().
  alignas(cache_line_size) std::atomic<std::uint64_t> executed_{ 0 };
  std::atomic<std::uint64_t> cancelled_{ 0 };
  std::atomic<std::uint64_t> sleeps_{ 0 };
  std::atomic<std::uint64_t> naps_{ 0 };
  std::atomic<std::uint64_t> dear_fences_{ 0 };

  // The shared queue, with its producers' in-flight count, its envelope count (all kinds) and
  // its task count (for stats): RMWs, on the slow path only.
  lockfree::queue<envelope> shared_;
  alignas(cache_line_size) std::atomic<std::uint32_t> shared_active_{ 0 };
  // Wakes under way (see "Wake-ups"); finish() waits for zero.
  std::atomic<std::uint32_t> wakers_{ 0 };
  std::atomic<std::uint64_t> shared_pushed_{ 0 };
  std::atomic<std::uint64_t> shared_posted_{ 0 };

  // Every lane ever opened and not retired, for stats() and destruction. Locked by producers
  // when they open a lane, by the consumer when it retires one, and by stats(): never per post.
  mutable std::mutex registry_mutex_;
  std::vector<inbox_lane*> registry_;
  std::uint64_t retired_posted_ = 0;  // guarded by registry_mutex_
};

}  // namespace cyan::dispatch::detail
