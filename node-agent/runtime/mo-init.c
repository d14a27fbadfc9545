/*
 * node-agent/runtime/mo-init.c -- a unit's namespaces and init in one small
 * program, in place of the util-linux chain namespaces.ts describes
 * (setpriv, unshare, an init shell and `mount`: four forks and five execs
 * per unit). The agent builds it with the system C compiler when one is
 * there (launcher/bundle.ts) and uses it when it passes a trial run at
 * start (namespaces.ts detectNamespaces); without it units get the same
 * namespaces through util-linux. docs/isolation.md tells both.
 *
 *   mo-init --pid NAME [CGROUP_PROCS...] -- COMMAND...
 *   mo-init --host-pid NAME [CGROUP_PROCS...] -- COMMAND...
 *   mo-init --warm
 *   mo-init --serve
 *   mo-init --check
 *
 * --pid: this process, P, takes SIGKILL when the agent dies (PR_SET_PDEATHSIG,
 * as setpriv --pdeathsig KILL), joins the unit's cgroups (writes 0 to each
 * cgroup.procs given: what it forks is born in them, so the agent moves no
 * process itself), makes new UTS, IPC, mount (propagation private) and PID
 * namespaces, and forks the namespace's init (PID 1 inside), which also
 * dies when P does (unshare --kill-child). P ignores SIGTERM, SIGINT and
 * SIGHUP and waits for the init; it exits with the init's status. The init
 * mounts /proc and a tmpfs on /tmp, sets the hostname to NAME, forks the
 * command (PID 2 inside: stdin /dev/null, fd 3 closed) and tells P, which
 * says `s<pid>` and a newline on fd 3: the command's pid on the host, read
 * from the host's /proc (`s` alone when it cannot be read). The init
 * forwards SIGTERM, SIGINT and SIGHUP to the command (the kernel drops
 * signals to a namespace's init that it has no handler for), reaps every
 * process of the namespace, says `x<status>` on fd 3 when the command has
 * exited and exits with that status: the command's exit code, or 128+N
 * when signal N killed it (as a shell gives it).
 *
 * --host-pid: the same without a PID namespace: P sets up UTS, IPC and
 * mount namespaces, /tmp, cgroups and hostname, then execs the command
 * itself (status.pid is P).
 *
 * --warm: a warm sandbox (sandbox-pool.ts): --pid's namespaces, /proc and
 * /tmp made before any unit exists. The init forks the unit's main process
 * to be (PID 2 inside), which blocks reading its stdin; P says `r<init>
 * <main>` and a newline on fd 3 (both host pids). The agent moves the three
 * into the unit's cgroups and writes the claim: the hostname, then each
 * environment entry KEY=VALUE, an empty field, then the command's words and
 * an empty field, every field ended by a NUL byte. The main process sets
 * the hostname and exactly that environment and execs the command; the
 * init says `x<status>` as --pid's does. EOF before a claim: it exits 0
 * (the sandbox was not used).
 *
 * Exit codes of its own: 125 (a namespace, mount or the hostname could not
 * be set up), 126 (a cgroup could not be joined), 127 (the command could
 * not be executed); each with one line on stderr naming the cause.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child = 0;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

static void die(int code, const char *what, const char *arg) {
  fprintf(stderr, "mini-orchestrator: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
  _exit(code);
}

static void say(const char *text) {
  ssize_t r = write(3, text, strlen(text));
  (void)r;
}

/* Into the unit's cgroups: this process and everything it forks after. */
static void join(char **procs, int nprocs) {
  for (int i = 0; i < nprocs; i++) {
    int fd = open(procs[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) die(126, "cannot join cgroup", procs[i]);
    close(fd);
  }
}

/*
 * The host pid of `init`'s first child (the command), through the host's
 * /proc opened before the init mounted the namespace's own over it; 0 when
 * it cannot be read.
 */
static long child_of(int hostproc, pid_t init) {
  char path[64];
  snprintf(path, sizeof path, "%d/task/%d/children", (int)init, (int)init);
  int fd = openat(hostproc, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtol(buf, NULL, 10);
}

/* Private mounts, the namespace's /proc, a tmpfs on /tmp, and the hostname (NULL: set later, by a warm sandbox's claim). */
static void set_up(const char *name, int with_proc) {
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die(125, "cannot make mounts private", NULL);
  if (with_proc) {
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV, NULL) != 0) die(125, "cannot mount", "/proc");
  }
  if (name && sethostname(name, strlen(name)) != 0) die(125, "cannot set hostname", name);
  if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0) die(125, "cannot mount a tmpfs on", "/tmp");
}

static void exec_command(char **argv);

/* Most bytes a warm sandbox's claim may have (namespaces.ts MAX_CLAIM_BYTES). */
#define MAX_CLAIM 16384

/* The next NUL-terminated field at *at (below end), or NULL when there is none. */
static char *next_field(char **at, char *end) {
  char *f = *at;
  char *nul = f < end ? memchr(f, 0, (size_t)(end - f)) : NULL;
  if (!nul) return NULL;
  *at = nul + 1;
  return f;
}

static void bad_claim(const char *why) {
  fprintf(stderr, "mini-orchestrator: bad claim: %s\n", why);
  _exit(126);
}

/* `count` (a field), at least `least`, then that many fields into out (NULL-ended); how many. */
static long fields(const char *count, long least, char **at, char *end, char **out, const char *what) {
  long n = count ? strtol(count, NULL, 10) : -1;
  if (n < least || n > MAX_CLAIM / 2) bad_claim(what);
  for (long i = 0; i < n; i++) {
    out[i] = next_field(at, end);
    if (!out[i]) bad_claim(what);
  }
  out[n] = NULL;
  return n;
}

/*
 * A warm sandbox's main process: read the claim from stdin, set the hostname
 * and the environment, exec the command. The claim is `<length>\0` and then
 * that many bytes: the hostname, the count of environment entries, each
 * KEY=VALUE, the count of the command's words, each word; every field ends
 * with a NUL (a word may be empty).
 */
static void run_claim(void) {
  static char buf[MAX_CLAIM + 32];
  size_t len = 0;
  size_t want = 0; /* header + payload, once the header is in */
  for (;;) {
    if (want == 0) {
      char *nul = memchr(buf, 0, len);
      if (nul) {
        char *stop;
        unsigned long n = strtoul(buf, &stop, 10);
        if (stop != nul || n > MAX_CLAIM) bad_claim("its length");
        want = (size_t)(nul - buf) + 1 + n;
      } else if (len > 16) {
        bad_claim("its length");
      }
    }
    if (want != 0 && len >= want) break;
    ssize_t r = read(0, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) die(126, "cannot read the claim", NULL);
    if (r == 0) {
      if (len == 0) _exit(0); /* the sandbox was not used */
      bad_claim("it ended early");
    }
    len += (size_t)r;
  }
  char *at = memchr(buf, 0, len) + 1;
  char *end = buf + want;
  const char *host = next_field(&at, end);
  const char *count = host ? next_field(&at, end) : NULL;
  if (!count) bad_claim("no hostname");
  static char *env[MAX_CLAIM / 2 + 1];
  static char *args[MAX_CLAIM / 2 + 1];
  fields(count, 0, &at, end, env, "its environment");
  fields(next_field(&at, end), 1, &at, end, args, "its command");
  if (sethostname(host, strlen(host)) != 0) die(125, "cannot set hostname", host);
  extern char **environ;
  environ = env;
  exec_command(args);
}

/* stdin from /dev/null from now on. */
static void stdin_null(void) {
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0 && null != 0) {
    dup2(null, 0);
    close(null);
  }
}

/*
 * Set by a vforked command whose exec failed: until its exec or _exit it
 * shares the init's memory, so the init, which resumes only then, reads
 * here whether a command ever ran (as glibc's posix_spawn learns its
 * child's exec error).
 */
static volatile int exec_errno = 0;

static void exec_command(char **argv) {
  stdin_null();
  close(3);
  execvp(argv[0], argv);
  int e = errno;
  exec_errno = e;
  fprintf(stderr, "mini-orchestrator: %s: %s\n", argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

static int status_of(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * P's part, from its parent-death signal to the init's exit: --pid,
 * --host-pid and --warm as the header says. `parent`: the process whose
 * death must take P along (the agent, or the spawn server of --serve);
 * 0 when it was not known before P existed.
 */
static int run_chain(int warm, int pid_ns, const char *name, char **procs, int nprocs, char **command, pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(125, "cannot set the parent-death signal", NULL);
  /* The parent may have died before the signal was armed. */
  if (parent != 0 && getppid() != parent) _exit(125);
  /* First the cgroups, so that everything after counts against the unit's limits. */
  join(procs, nprocs);
  if (unshare(CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS | (pid_ns ? CLONE_NEWPID : 0)) != 0) die(125, "cannot make namespaces", NULL);

  if (!pid_ns) {
    set_up(name, 0);
    close(3);
    exec_command(command);
  }

  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  /* The host's /proc, for the command's host pid: P shares the mount namespace the init mounts its own /proc in. */
  int hostproc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int forked[2];
  if (pipe2(forked, O_CLOEXEC) != 0) die(125, "cannot make a pipe", NULL);
  pid_t init = fork();
  if (init < 0) die(125, "cannot fork", NULL);
  if (init > 0) {
    /* P: say the command's host pid once the init has forked it, wait for the init, exit with its status. */
    close(forked[1]);
    if (warm) stdin_null(); /* the claim is the main process's to read */
    char c;
    ssize_t n;
    while ((n = read(forked[0], &c, 1)) < 0 && errno == EINTR) {
    }
    close(forked[0]);
    if (n == 1) {
      char line[48];
      long pid = hostproc >= 0 ? child_of(hostproc, init) : 0;
      if (warm) {
        /* Without the main process's host pid the sandbox is of no use: the agent kills it. */
        if (pid > 0) snprintf(line, sizeof line, "r%d %ld\n", (int)init, pid);
        else snprintf(line, sizeof line, "r\n");
      } else if (pid > 0) {
        snprintf(line, sizeof line, "s%ld\n", pid);
      } else {
        snprintf(line, sizeof line, "s\n");
      }
      say(line);
    }
    if (hostproc >= 0) close(hostproc);
    int st;
    while (waitpid(init, &st, 0) < 0) {
      if (errno != EINTR) die(125, "cannot wait", NULL);
    }
    return status_of(st);
  }

  /* PID 1 of the unit's PID namespace. Nothing of the host's /proc stays open in here. */
  if (hostproc >= 0) close(hostproc);
  close(forked[0]);
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(125, "cannot set the parent-death signal", NULL);
  set_up(name, 1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGHUP);
  sigprocmask(SIG_BLOCK, &block, &old);
  /*
   * A cold start's command is forked with vfork: the child borrows the
   * init's memory until its exec (the init waits that long), so no page
   * table is copied and no page is copied on write. Until the exec it only
   * makes system calls on its own state (signal dispositions, mask, fds)
   * and never returns; if the exec fails it says so and _exits. 1,000
   * isolated starts through 4 servers (bench/cluster.ts isolatedSpawn, 3
   * runs each, machine CPU-bound): 5.0-5.2 s with fork, 4.3-4.5 s with
   * vfork. A warm sandbox's main process reads its claim first: it forks.
   */
  pid_t c = warm ? fork() : vfork();
  if (c < 0) die(125, "cannot fork", NULL);
  if (c == 0) {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    prctl(PR_SET_PDEATHSIG, 0);
    if (warm) run_claim();
    exec_command(command);
  }
  if (warm) stdin_null();
  child = c;
  sigprocmask(SIG_SETMASK, &old, NULL);
  /*
   * `s` (the command runs) only if it does: a vforked command whose exec
   * failed has exited already, and P, hearing nothing, says nothing. Else,
   * on a busy machine, P's `s<pid>` could reach the agent before this
   * init's `x127`, and the unit was reported Running once.
   */
  if (exec_errno == 0) {
    ssize_t told = write(forked[1], "s", 1);
    (void)told;
  }
  close(forked[1]);
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, 0);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(125);
    }
    if (w == c) {
      char line[32];
      int s = status_of(st);
      snprintf(line, sizeof line, "x%d\n", s);
      say(line);
      _exit(s);
    }
  }
}

/*
 * --serve: a spawner that stays, so that starting a unit costs the agent
 * one write instead of a fork of its own large process and an exec of
 * mo-init (spawn-server.ts). It takes SIGKILL when the agent dies, as P
 * does, and exits when its stdin ends. Requests come on stdin, each
 * `<length>\0` and then that many bytes of NUL-ended fields: the unit's id
 * (decimal, the agent's own), `pid` or `host-pid`, the unit's name, the
 * working directory, the unit's cgroup directories to make (make_cgroups
 * says how), the count of cgroup.procs files and each, the count of
 * environment entries and each KEY=VALUE, the count of the command's words
 * and each. For each, the server forks P (no exec: P runs --pid's or
 * --host-pid's part from here, in a session of its own, with the
 * environment and directory asked), with stdout, stderr and fd 3 on pipes
 * of their own and nothing else of the server's open. P parses the request
 * itself: a bad one is its own failure (exit 126, one line on stderr),
 * never the server's.
 *
 * Frames go to the agent on stdout: a kind byte, the unit's id and the
 * payload's length (both 32-bit little-endian), then the payload:
 *   p  P was forked: its pid (decimal)        f  it could not be: why
 *   o  P's stdout bytes     e  its stderr     3  its fd 3 (`s<pid>`, `x<status>`)
 *   O  stdout ended         E  stderr ended   #  fd 3 ended
 *   w  P was reaped: `c<code>` or `k<signal>`
 * A unit's `p` comes before anything else of it. Writes to the agent block
 * (the agent always reads); while they do, the server reads nothing else.
 */
/* Largest request: the command's words and environment of one unit. */
#define SERVE_MAX_REQUEST (8u << 20)
#define SERVE_TAG (1ull << 63)

static void write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) _exit(0); /* the agent is gone: so are we, and P's parent-death signal takes the units */
    p += w;
    len -= (size_t)w;
  }
}

static void frame(char kind, uint32_t id, const void *data, uint32_t len) {
  unsigned char h[9] = {(unsigned char)kind, id, id >> 8, id >> 16, id >> 24, len, len >> 8, len >> 16, len >> 24};
  write_all(1, h, sizeof h);
  if (len > 0) write_all(1, data, len);
}

static void frame_text(char kind, uint32_t id, const char *text) {
  frame(kind, id, text, (uint32_t)strlen(text));
}

struct served { pid_t pid; uint32_t id; };
static struct served *served;
static size_t nserved, capserved;

/* Every fd from `from` on closed (close_range, or one by one where the kernel has none). */
static void close_from(int from) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)from, ~0u, 0) == 0) return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = from; fd < (max > 0 ? max : 65536); fd++) close((int)fd);
}

/*
 * The unit's cgroup directories, each with its limit files written, before
 * P joins them: the count of directories, then for each its path, the count
 * of files and each file's name and value (a name starting with `?` is
 * skipped when the kernel has no such file). Here, not in the agent, so
 * that the kernel's cgroup locks, which a busy machine holds for
 * milliseconds, hold up this process and not the agent's event loop.
 */
/* Every missing directory above `dir` (its node's, the first time), as mkdir -p; 0 when one cannot be made. */
static int mkdir_parents(const char *dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = 0;
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return 0;
    *slash = '/';
  }
  return 1;
}

static void make_cgroups(char **at, char *end) {
  const char *count = next_field(at, end);
  long n = count ? strtol(count, NULL, 10) : -1;
  if (n < 0 || n > 16) bad_claim("its cgroup directories");
  for (long i = 0; i < n; i++) {
    const char *dir = next_field(at, end);
    const char *files = dir ? next_field(at, end) : NULL;
    long k = files ? strtol(files, NULL, 10) : -1;
    if (k < 0 || k > 64) bad_claim("its cgroup directories");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST && !(errno == ENOENT && mkdir_parents(dir) && (mkdir(dir, 0755) == 0 || errno == EEXIST)))
      die(126, "cannot set up cgroup", dir);
    for (long j = 0; j < k; j++) {
      const char *file = next_field(at, end);
      const char *value = file ? next_field(at, end) : NULL;
      if (!value) bad_claim("its cgroup directories");
      int optional = file[0] == '?';
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, file + optional);
      int fd = open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0 && optional && errno == ENOENT) continue;
      if (fd < 0 || write(fd, value, strlen(value)) != (ssize_t)strlen(value)) {
        if (optional) {
          if (fd >= 0) close(fd);
          continue;
        }
        die(126, "cannot set up cgroup", path);
      }
      close(fd);
    }
  }
}

/* The server's argv and environment strings, one contiguous area on its stack (main sets it): P writes its title there. */
static char *title_at, *title_end;

/*
 * What ps shows for P (and the init it forks): `mo-init --pid NAME`, as a
 * spawned P shows, not the server's `mo-init --serve` it was forked with.
 * Written over the server's argv and environment strings (P has its own
 * environment by then), as setproctitle does: where the title runs past
 * the argv, Linux reads /proc/PID/cmdline on into that area.
 */
static void retitle(const char *flag, const char *name) {
  if (!title_at || title_end <= title_at) return;
  size_t room = (size_t)(title_end - title_at);
  int n = snprintf(title_at, room, "mo-init %s %s", flag, name);
  if (n < 0) return;
  size_t used = (size_t)n + 1 < room ? (size_t)n + 1 : room;
  memset(title_at + used, 0, room - used);
}

/* P of a served unit: the request's fields after the id, then run_chain. */
static void serve_child(char *at, char *end, pid_t server) {
  const char *mode = next_field(&at, end);
  const char *name = mode ? next_field(&at, end) : NULL;
  const char *cwd = name ? next_field(&at, end) : NULL;
  if (!cwd || (strcmp(mode, "pid") != 0 && strcmp(mode, "host-pid") != 0)) bad_claim("no mode, name or directory");
  make_cgroups(&at, end);
  long most = (long)(end - at) + 1;
  char **procs = calloc((size_t)most + 1, sizeof *procs);
  char **env = calloc((size_t)most + 1, sizeof *env);
  char **args = calloc((size_t)most + 1, sizeof *args);
  if (!procs || !env || !args) die(126, "cannot allocate", NULL);
  long counts[3];
  char **outs[3] = {procs, env, args};
  for (int k = 0; k < 3; k++) {
    const char *count = next_field(&at, end);
    long n = count ? strtol(count, NULL, 10) : -1;
    if (n < (k == 2 ? 1 : 0) || n > most) bad_claim(k == 0 ? "its cgroups" : k == 1 ? "its environment" : "its command");
    for (long i = 0; i < n; i++) {
      outs[k][i] = next_field(&at, end);
      if (!outs[k][i]) bad_claim(k == 0 ? "its cgroups" : k == 1 ? "its environment" : "its command");
    }
    outs[k][n] = NULL;
    counts[k] = n;
  }
  retitle(strcmp(mode, "pid") == 0 ? "--pid" : "--host-pid", name);
  if (chdir(cwd) != 0) die(126, "cannot enter", cwd);
  extern char **environ;
  environ = env;
  _exit(run_chain(0, strcmp(mode, "pid") == 0, name, procs, (int)counts[0], args, server));
}

static void serve_one(int ep, char *req, size_t len, pid_t self) {
  char *at = req;
  char *end = req + len;
  const char *idf = next_field(&at, end);
  if (!idf) return; /* no id to answer to: nothing can be said about it */
  uint32_t id = (uint32_t)strtoul(idf, NULL, 10);
  int fds[3][2];
  int made = 0;
  for (; made < 3; made++)
    if (pipe2(fds[made], O_CLOEXEC) != 0) break;
  if (made < 3) {
    char why[160];
    snprintf(why, sizeof why, "cannot make a pipe: %s", strerror(errno));
    for (int k = 0; k < made; k++) close(fds[k][0]), close(fds[k][1]);
    frame_text('f', id, why);
    return;
  }
  pid_t p = fork();
  if (p == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    setsid();
    for (int k = 0; k < 3; k++) dup2(fds[k][1], k + 1);
    stdin_null();
    close_from(4);
    serve_child(at, end, self);
  }
  for (int k = 0; k < 3; k++) close(fds[k][1]);
  if (p < 0) {
    char why[160];
    snprintf(why, sizeof why, "cannot fork: %s", strerror(errno));
    for (int k = 0; k < 3; k++) close(fds[k][0]);
    frame_text('f', id, why);
    return;
  }
  if (nserved == capserved) {
    capserved = capserved ? capserved * 2 : 64;
    served = realloc(served, capserved * sizeof *served);
    if (!served) _exit(125);
  }
  served[nserved++] = (struct served){p, id};
  char text[24];
  snprintf(text, sizeof text, "%d", (int)p);
  frame_text('p', id, text);
  for (int k = 0; k < 3; k++) {
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ((uint64_t)id << 32) | ((uint64_t)k << 24) | (uint64_t)fds[k][0]};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[k][0], &ev) != 0) close(fds[k][0]);
  }
}

static void reap(void) {
  for (;;) {
    int st;
    pid_t w = waitpid(-1, &st, WNOHANG);
    if (w <= 0) return;
    for (size_t i = 0; i < nserved; i++) {
      if (served[i].pid != w) continue;
      char text[24];
      if (WIFEXITED(st)) snprintf(text, sizeof text, "c%d", WEXITSTATUS(st));
      else snprintf(text, sizeof text, "k%d", WTERMSIG(st));
      frame_text('w', served[i].id, text);
      served[i] = served[--nserved];
      break;
    }
  }
}

static int serve(void) {
  pid_t agent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(125, "cannot set the parent-death signal", NULL);
  if (getppid() != agent) return 0;
  pid_t self = getpid();
  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (sfd < 0 || ep < 0) die(125, "cannot set up the spawn server", NULL);
  struct epoll_event in = {.events = EPOLLIN, .data.u64 = SERVE_TAG | 0};
  struct epoll_event sig = {.events = EPOLLIN, .data.u64 = SERVE_TAG | 1};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, 0, &in) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &sig) != 0) die(125, "cannot set up the spawn server", NULL);
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  static char chunk[65536];
  if (!buf) die(125, "cannot allocate", NULL);
  for (;;) {
    struct epoll_event evs[64];
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die(125, "cannot wait", NULL);
    }
    for (int i = 0; i < n; i++) {
      uint64_t d = evs[i].data.u64;
      if (d == (SERVE_TAG | 1)) {
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        }
        reap();
      } else if (d == (SERVE_TAG | 0)) {
        if (cap - len < 65536) {
          cap *= 2;
          buf = realloc(buf, cap);
          if (!buf) die(125, "cannot allocate", NULL);
        }
        ssize_t r = read(0, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0; /* the agent closed our stdin, or died: the units' P die with us */
        len += (size_t)r;
        /* Every whole request in the buffer, in order. */
        size_t at = 0;
        for (;;) {
          char *nul = memchr(buf + at, 0, len - at);
          if (!nul) {
            if (len - at > 16) die(125, "bad request", "(its length)");
            break;
          }
          char *stop;
          unsigned long want = strtoul(buf + at, &stop, 10);
          if (stop != nul || want > SERVE_MAX_REQUEST) die(125, "bad request", "(its length)");
          size_t body = (size_t)(nul - buf) + 1;
          if (len - body < want) break;
          serve_one(ep, buf + body, want, self);
          at = body + want;
        }
        memmove(buf, buf + at, len - at);
        len -= at;
      } else {
        uint32_t id = (uint32_t)(d >> 32);
        int k = (int)((d >> 24) & 0xff);
        int fd = (int)(d & 0xffffff);
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR) continue;
        if (r > 0) {
          frame("oe3"[k], id, chunk, (uint32_t)r);
        } else {
          epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
          close(fd);
          frame("OE#"[k], id, NULL, 0);
        }
      }
    }
  }
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--check") == 0) {
    /* The agent's trial: every namespace and mount a unit gets, then exit 0. */
    if (unshare(CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNS | CLONE_NEWPID) != 0) die(125, "cannot make namespaces", NULL);
    pid_t p = fork();
    if (p < 0) die(125, "cannot fork", NULL);
    if (p == 0) {
      set_up("mo-check", 1);
      _exit(0);
    }
    int st;
    if (waitpid(p, &st, 0) < 0) die(125, "cannot wait", NULL);
    return status_of(st);
  }
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) {
    extern char **environ;
    title_at = argv[0];
    title_end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
    for (char **e = environ; *e && *e == title_end; e++) title_end = *e + strlen(*e) + 1;
    return serve();
  }
  int warm = argc == 2 && strcmp(argv[1], "--warm") == 0;
  if (!warm && (argc < 5 || (strcmp(argv[1], "--pid") != 0 && strcmp(argv[1], "--host-pid") != 0))) {
    fprintf(stderr, "usage: mo-init --pid|--host-pid NAME [CGROUP_PROCS...] -- COMMAND... | --warm | --serve | --check\n");
    return 2;
  }
  int pid_ns = warm || strcmp(argv[1], "--pid") == 0;
  const char *name = NULL;
  char **procs = NULL;
  int nprocs = 0;
  char **command = NULL;
  if (!warm) {
    name = argv[2];
    int sep = 3;
    while (sep < argc && strcmp(argv[sep], "--") != 0) sep++;
    if (sep + 1 >= argc) {
      fprintf(stderr, "mini-orchestrator: mo-init: no command after --\n");
      return 2;
    }
    procs = argv + 3;
    nprocs = sep - 3;
    command = argv + sep + 1;
  }

  return run_chain(warm, pid_ns, name, procs, nprocs, command, 0);
}
