// Preloaded (LD_PRELOAD) into the Python processes run_tests.sh starts: when one
// crashes (SIGSEGV, SIGBUS, SIGILL, SIGFPE), this prints the crashing thread's
// native stack to stderr, then the process dies of the same signal. Python's
// faulthandler, which pytest enables, prints only Python frames ("<no Python
// frame>" for a crash inside C++), and the GPU machine has no gdb; cuda-gdb
// there took over 80 s to start Python with torch.
//
// faulthandler installs its handler after this one and, once it has printed the
// Python stacks, restores the handler it found (this one) and raises the signal
// again, so both stacks are printed. Frames print as library(symbol+offset)[address];
// addr2line -f -C -e <library> <offset> names static functions too.
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

static void print_native_stack(int signal_number) {
  static const char header[] = "\nnative stack of the crashing thread (tools/gpu_runner/native_backtrace.c):\n";
  void* frames[64];
  const int count = backtrace(frames, 64);
  (void)!write(STDERR_FILENO, header, sizeof header - 1);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

__attribute__((constructor)) static void install_crash_handler(void) {
  // backtrace() loads libgcc_s at its first call: do that now, not inside the handler.
  void* warm_up[1];
  backtrace(warm_up, 1);
  // A stack of its own, so that a stack overflow still gets its backtrace.
  static char alternate_stack[64 * 1024];
  stack_t stack = {.ss_sp = alternate_stack, .ss_size = sizeof alternate_stack};
  sigaltstack(&stack, NULL);
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = print_native_stack;
  action.sa_flags = SA_ONSTACK | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < sizeof kSignals / sizeof kSignals[0]; ++i) {
    sigaction(kSignals[i], &action, NULL);
  }
}
