/*
 * pause: the process that holds a pod sandbox's namespaces open.
 *
 * Every pod gets one "infrastructure" container whose only job is to exist: the network, IPC and
 * UTS namespaces the app containers join belong to it, so they outlive any app container restart.
 * When the pod shares its PID namespace, this process is PID 1 there and must reap orphaned
 * children, or they pile up as zombies. It exits 0 on SIGTERM/SIGINT so StopPodSandbox is quick
 * (a PID 1 without a handler would ignore SIGTERM and wait out the whole timeout).
 *
 * Built by deploy/images/build.sh with `gcc -static -Os -s`: the image has no libc to link against.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_terminate(int sig) {
    (void)sig;
    _exit(0); /* async-signal-safe, unlike exit() */
}

static void on_child(int sig) {
    (void)sig;
    int saved = errno; /* waitpid may clobber errno of the interrupted pause() */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int install(int sig, void (*handler)(int), int flags) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    return sigaction(sig, &sa, NULL);
}

int main(void) {
    if (install(SIGTERM, on_terminate, 0) != 0 || install(SIGINT, on_terminate, 0) != 0 ||
        install(SIGCHLD, on_child, SA_NOCLDSTOP | SA_RESTART) != 0) {
        static const char msg[] = "pause: cannot install signal handlers\n";
        (void)write(2, msg, sizeof msg - 1);
        return 1;
    }
    for (;;) {
        pause(); /* returns after each handled signal; sleep again */
    }
}
