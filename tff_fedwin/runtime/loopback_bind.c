/* LD_PRELOAD shim confining a TFF worker to loopback and to its own user.
 *
 * bind(): a socket bound to a wildcard address is bound to loopback.
 *
 *   0.0.0.0         (AF_INET)  -> 127.0.0.1
 *   ::              (AF_INET6) -> ::1
 *   ::ffff:0.0.0.0  (AF_INET6) -> ::ffff:127.0.0.1
 *
 * Any other bind() is passed through unchanged.
 *
 * accept() and accept4(): a connection is handed to the caller only if the
 * socket at its other end belongs to this process's effective uid. For TCP the
 * owner is the uid column of the peer socket's line in /proc/net/tcp or
 * /proc/net/tcp6 (local address = the connection's peer, remote address = its
 * local end, state neither LISTEN nor TIME_WAIT, whose uid the kernel does not
 * keep); for Unix-domain sockets it is SO_PEERCRED. Any other family, or an
 * owner that cannot be found, is refused (fail closed). A refused connection
 * is closed before the caller sees a byte of it, and the call accepts the
 * next one, so a non-blocking caller (gRPC) gets its usual EAGAIN once the
 * queue is empty and keeps serving.
 *
 * TFF's worker_binary serves unauthenticated gRPC on [::]:port and has no flag
 * for the address; tff_fedwin.runtime.loopback preloads this library into it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

/* At most this many refusals are written to stderr (the worker log). */
#define MAX_LOGGED_REFUSALS 20

/* The last four bytes of ::ffff:a.b.c.d hold a.b.c.d. */
static int is_v4_mapped_any(const struct in6_addr *addr) {
  static const unsigned char any[4] = {0, 0, 0, 0};
  return IN6_IS_ADDR_V4MAPPED(addr) && memcmp(&addr->s6_addr[12], any, 4) == 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (real_bind == NULL) {
    real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (real_bind == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  if (addr != NULL && addr->sa_family == AF_INET6 &&
      len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 a;
    memcpy(&a, addr, sizeof(a));
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {
      a.sin6_addr = in6addr_loopback;
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
    if (is_v4_mapped_any(&a.sin6_addr)) {
      const unsigned char loopback[4] = {127, 0, 0, 1};
      memcpy(&a.sin6_addr.s6_addr[12], loopback, 4);
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
  } else if (addr != NULL && addr->sa_family == AF_INET &&
             len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in a;
    memcpy(&a, addr, sizeof(a));
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&a, sizeof(a));
    }
  }
  return real_bind(fd, addr, len);
}

/* An IP endpoint as /proc/net/tcp{,6} prints it: each 32-bit word of the
 * address with %08X in host byte order, then ":" and the port with %04X. */
typedef struct {
  char v4[8 + 1 + 4 + 1];   /* For /proc/net/tcp; empty if not IPv4. */
  char v6[32 + 1 + 4 + 1];  /* For /proc/net/tcp6. */
} proc_endpoint;

static void format_v6(char *out, size_t size, const struct in6_addr *addr,
                      unsigned port) {
  uint32_t words[4];
  memcpy(words, addr->s6_addr, sizeof(words));
  snprintf(out, size, "%08X%08X%08X%08X:%04X", words[0], words[1], words[2],
           words[3], port);
}

/* 0 if `sa` is an IPv4 or IPv6 address; IPv4 (also ::ffff:a.b.c.d) gets both
 * forms, since either end may be an AF_INET6 socket seeing v4-mapped ones. */
static int to_proc_endpoint(const struct sockaddr_storage *sa,
                            proc_endpoint *out) {
  struct in6_addr mapped;
  unsigned port;
  uint32_t v4;
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    v4 = in->sin_addr.s_addr;
    port = ntohs(in->sin_port);
  } else if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    port = ntohs(in6->sin6_port);
    if (!IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      out->v4[0] = '\0';
      format_v6(out->v6, sizeof(out->v6), &in6->sin6_addr, port);
      return 0;
    }
    memcpy(&v4, &in6->sin6_addr.s6_addr[12], 4);
  } else {
    return -1;
  }
  snprintf(out->v4, sizeof(out->v4), "%08X:%04X", v4, port);
  memset(&mapped, 0, sizeof(mapped));
  mapped.s6_addr[10] = 0xff;
  mapped.s6_addr[11] = 0xff;
  memcpy(&mapped.s6_addr[12], &v4, 4);
  format_v6(out->v6, sizeof(out->v6), &mapped, port);
  return 0;
}

/* Counts the live sockets in `table` whose local end is `local` and remote
 * end `remote`, storing the owner of the last one in `*owner`; -1 if the
 * table cannot be read or parsed. */
static int count_matches(const char *table, const char *local,
                         const char *remote, unsigned long *owner) {
  char line[512];
  FILE *f;
  int found = 0;
  f = fopen(table, "re");
  if (f == NULL) return errno == ENOENT ? 0 : -1;  /* tcp6: IPv6 disabled. */
  if (fgets(line, sizeof(line), f) == NULL) { /* Header. */
    fclose(f);
    return -1;
  }
  while (fgets(line, sizeof(line), f) != NULL) {
    char l[64], r[64];
    unsigned state;
    unsigned long uid;
    if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %lu", l, r, &state,
               &uid) != 4) {
      fclose(f);
      return -1;
    }
    /* 0x0A: LISTEN; 0x06: TIME_WAIT, printed with uid 0 whoever owned it. */
    if (state == 0x0A || state == 0x06) continue;
    if (strcasecmp(l, local) != 0 || strcasecmp(r, remote) != 0) continue;
    ++found;
    *owner = uid;
  }
  fclose(f);
  return found;
}

/* 1 if the socket at the other end of connection `fd` is owned by `uid`;
 * 0 if by another uid or if that cannot be told. `*peer_uid` receives the
 * owner when one was found, else -1. */
static int peer_is_owned_by(int fd, uid_t uid, long *peer_uid) {
  struct sockaddr_storage ours, theirs;
  socklen_t len = sizeof(ours);
  proc_endpoint local, remote;
  unsigned long owner = 0;
  int found;
  *peer_uid = -1;
  if (getsockname(fd, (struct sockaddr *)&ours, &len) != 0) return 0;
  if (ours.ss_family == AF_UNIX) {
    struct ucred cred;
    socklen_t cred_len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
        cred_len != sizeof(cred))
      return 0;
    *peer_uid = (long)cred.uid;
    return cred.uid == uid;
  }
  len = sizeof(theirs);
  if (getpeername(fd, (struct sockaddr *)&theirs, &len) != 0) return 0;
  if (to_proc_endpoint(&theirs, &local) != 0 ||
      to_proc_endpoint(&ours, &remote) != 0)
    return 0;
  /* The peer's socket: its local end is our peer, its remote end is us. */
  found = count_matches("/proc/net/tcp6", local.v6, remote.v6, &owner);
  if (found < 0) return 0;
  if (local.v4[0] != '\0' && remote.v4[0] != '\0') {
    int found_v4 = count_matches("/proc/net/tcp", local.v4, remote.v4, &owner);
    if (found_v4 < 0) return 0;
    found += found_v4;
  }
  if (found != 1) return 0;  /* Gone (or ambiguous): fail closed. */
  *peer_uid = (long)owner;
  return owner == (unsigned long)uid;
}

static void log_refusal(long peer_uid, uid_t uid) {
  static int logged = 0;
  char message[200];
  int n, count = __atomic_add_fetch(&logged, 1, __ATOMIC_RELAXED);
  if (count > MAX_LOGGED_REFUSALS) return;
  if (peer_uid >= 0)
    n = snprintf(message, sizeof(message),
                 "tff_fedwin loopback shim: refused a connection from uid "
                 "%ld (this worker serves uid %lu only)%s\n",
                 peer_uid, (unsigned long)uid,
                 count == MAX_LOGGED_REFUSALS ? "; further refusals not logged"
                                              : "");
  else
    n = snprintf(message, sizeof(message),
                 "tff_fedwin loopback shim: refused a connection whose owner "
                 "is not uid %lu or cannot be told%s\n",
                 (unsigned long)uid,
                 count == MAX_LOGGED_REFUSALS ? "; further refusals not logged"
                                              : "");
  if (n > 0) {
    ssize_t ignored = write(STDERR_FILENO, message, (size_t)n);
    (void)ignored;
  }
}

/* Marker: tff_fedwin.runtime.loopback checks the worker loaded this shim. */
const char tff_fedwin_peer_uid_check[] = "accept4 peer uid check v1";

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  static accept4_fn real_accept4 = NULL;
  uid_t uid = geteuid();
  if (real_accept4 == NULL) {
    real_accept4 = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
    if (real_accept4 == NULL) {
      errno = ENOSYS;
      return -1;
    }
  }
  for (;;) {
    socklen_t caller_len = len != NULL ? *len : 0;
    long peer_uid;
    int conn = real_accept4(fd, addr, len, flags);
    if (conn < 0) return conn;
    if (peer_is_owned_by(conn, uid, &peer_uid)) return conn;
    log_refusal(peer_uid, uid);
    close(conn);
    if (len != NULL) *len = caller_len;
  }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  return accept4(fd, addr, len, 0);
}
