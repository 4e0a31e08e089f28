/* cbfwd -- delay line for the cloudbench WAN emulation (there is no netem here).
 *
 * Each direction of a WAN link is a TUN device that the router's policy routing
 * sends transit packets into; cbfwd reads them, holds each one until
 * arrival + delay(arrival) and writes it back, after which the kernel routes it on.
 *
 *   cbfwd CONFIG
 *
 * CONFIG (written by cloudbench/providers/netns/wan.py; times in ns; one directive per line):
 *   epoch NS                 CLOCK_MONOTONIC time that schedule times count from
 *   ready PATH               file created once every TUN is attached
 *   stats PATH               JSON counters written on exit
 *   capacity N               packets queued per direction (beyond: dropped)
 *   rt PRIO                  SCHED_FIFO priority (0: normal scheduling)
 *   spin NS                  most to wake early and spin to the due time (adaptive, below)
 *   dir TUN                  starts a direction; the lines below belong to it
 *   base NS                  one-way delay before any step
 *   step AT NS               from AT on, the base delay is NS
 *   periodic AMP PERIOD PH   + AMP*sin(2*pi*(t-PH)/PERIOD)
 *   spike AT DUR EXTRA       + EXTRA while AT <= t < AT+DUR
 *
 * Why the details:
 * - Packets leave in arrival order (release = max(due, previous release)): a
 *   delay that drops must not reorder a TCP flow.
 * - Forwarding through the TUN makes the router decrement the TTL twice (once
 *   into the TUN, once out of it); cbfwd gives one back so the router is one
 *   traceroute hop, not two hops with the same address (a false loop).
 * - Timer slack is set to 1 ns: the default 50 us slack of an ordinary thread
 *   is the largest error source of a sleeping delay line.
 * - The rest of a timer's lateness is the wake-up of an idle vCPU (tens of us,
 *   varying with load). cbfwd keeps an average of how late its timer fired and
 *   arms the next one that much early (at most `spin`), then spins the short
 *   remainder: a bounded spin per wake-up instead of a busy core.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define VERSION "1"
#define MAXDIR 8
#define MAXEV 64
#define SLOT 2048 /* > MTU 1500 of every testbed link */
#define READ_BATCH 256

struct step { int64_t at, delay; };
struct periodic { int64_t amp, period, phase; };
struct spike { int64_t at, dur, extra; };

struct dir {
    char tun[IFNAMSIZ];
    int fd;
    int64_t base;
    struct step steps[MAXEV]; int nsteps;
    struct periodic per[MAXEV]; int nper;
    struct spike spikes[MAXEV]; int nspikes;
    /* ring of queued packets */
    unsigned char *buf; int64_t *due; uint16_t *len;
    uint32_t head, count;
    int64_t last_release;
    uint64_t pkts, bytes, drops, write_err, late_ns_max, late_ns_sum;
};

static struct dir dirs[MAXDIR];
static int ndirs;
static uint32_t capacity = 8192;
static int64_t epoch;
static int rt_prio;
static int64_t spin_ns = 100000;
static int64_t lead_ns; /* average timer lateness, capped at spin_ns */
static char ready_path[4096], stats_path[4096];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "cbfwd: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int64_t delay_at(const struct dir *d, int64_t t) {
    int64_t rel = t - epoch, best_at = INT64_MIN, v = d->base;
    for (int i = 0; i < d->nsteps; i++)
        if (d->steps[i].at <= rel && d->steps[i].at >= best_at) { best_at = d->steps[i].at; v = d->steps[i].delay; }
    for (int i = 0; i < d->nper; i++)
        v += (int64_t)((double)d->per[i].amp *
                       sin(2.0 * M_PI * (double)(rel - d->per[i].phase) / (double)d->per[i].period));
    for (int i = 0; i < d->nspikes; i++)
        if (rel >= d->spikes[i].at && rel < d->spikes[i].at + d->spikes[i].dur) v += d->spikes[i].extra;
    return v < 0 ? 0 : v;
}

static void parse(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die(path);
    char line[4352];
    struct dir *cur = NULL;
    while (fgets(line, sizeof line, f)) {
        char key[32] = {0}, s[4096] = {0};
        long long a = 0, b = 0, c = 0;
        if (sscanf(line, "%31s", key) != 1 || key[0] == '#') continue;
        if (!strcmp(key, "epoch")) sscanf(line, "%*s %lld", &a), epoch = a;
        else if (!strcmp(key, "capacity")) sscanf(line, "%*s %lld", &a), capacity = (uint32_t)a;
        else if (!strcmp(key, "rt")) sscanf(line, "%*s %lld", &a), rt_prio = (int)a;
        else if (!strcmp(key, "spin")) sscanf(line, "%*s %lld", &a), spin_ns = a;
        else if (!strcmp(key, "ready")) sscanf(line, "%*s %4095s", ready_path);
        else if (!strcmp(key, "stats")) sscanf(line, "%*s %4095s", stats_path);
        else if (!strcmp(key, "dir")) {
            if (ndirs == MAXDIR) { fprintf(stderr, "cbfwd: too many directions\n"); exit(2); }
            cur = &dirs[ndirs++];
            sscanf(line, "%*s %4095s", s);
            snprintf(cur->tun, IFNAMSIZ, "%s", s);
        } else if (!cur) {
            fprintf(stderr, "cbfwd: %s before any dir\n", key); exit(2);
        } else if (!strcmp(key, "base")) sscanf(line, "%*s %lld", &a), cur->base = a;
        else if (!strcmp(key, "step") && cur->nsteps < MAXEV) {
            sscanf(line, "%*s %lld %lld", &a, &b);
            cur->steps[cur->nsteps++] = (struct step){a, b};
        } else if (!strcmp(key, "periodic") && cur->nper < MAXEV) {
            sscanf(line, "%*s %lld %lld %lld", &a, &b, &c);
            if (b <= 0) { fprintf(stderr, "cbfwd: period must be > 0\n"); exit(2); }
            cur->per[cur->nper++] = (struct periodic){a, b, c};
        } else if (!strcmp(key, "spike") && cur->nspikes < MAXEV) {
            sscanf(line, "%*s %lld %lld %lld", &a, &b, &c);
            cur->spikes[cur->nspikes++] = (struct spike){a, b, c};
        } else {
            fprintf(stderr, "cbfwd: unknown or excess directive %s\n", key); exit(2);
        }
    }
    fclose(f);
    if (ndirs == 0) { fprintf(stderr, "cbfwd: no dir in %s\n", path); exit(2); }
}

static void open_tun(struct dir *d) {
    struct ifreq ifr;
    d->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (d->fd < 0) die("/dev/net/tun");
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    memcpy(ifr.ifr_name, d->tun, IFNAMSIZ - 1);
    if (ioctl(d->fd, TUNSETIFF, &ifr) < 0) die(d->tun);
    d->buf = malloc((size_t)capacity * SLOT);
    d->due = malloc((size_t)capacity * sizeof(int64_t));
    d->len = malloc((size_t)capacity * sizeof(uint16_t));
    if (!d->buf || !d->due || !d->len) die("malloc");
}

/* Give back the TTL the kernel took on the way into the TUN (RFC 1624 checksum update). */
static void restore_ttl(unsigned char *p, size_t n) {
    if (n >= 20 && (p[0] >> 4) == 4) {
        if (p[8] == 255) return;
        uint16_t old = (uint16_t)(p[8] << 8 | p[9]);
        p[8]++;
        uint16_t new = (uint16_t)(p[8] << 8 | p[9]);
        uint32_t sum = (uint16_t)~(p[10] << 8 | p[11]);
        sum += (uint16_t)~old;
        sum += new;
        while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
        sum = ~sum & 0xffff;
        p[10] = (unsigned char)(sum >> 8);
        p[11] = (unsigned char)sum;
    } else if (n >= 40 && (p[0] >> 4) == 6 && p[7] < 255) {
        p[7]++;
    }
}

static void receive(struct dir *d) {
    for (int i = 0; i < READ_BATCH; i++) {
        unsigned char tmp[SLOT];
        unsigned char *dst = d->count < capacity
            ? d->buf + (size_t)((d->head + d->count) % capacity) * SLOT : tmp;
        ssize_t n = read(d->fd, dst, SLOT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            die("read");
        }
        if (dst == tmp) { d->drops++; continue; }
        int64_t t = now_ns();
        int64_t due = t + delay_at(d, t);
        if (due < d->last_release) due = d->last_release;
        d->last_release = due;
        uint32_t slot = (d->head + d->count) % capacity;
        d->due[slot] = due;
        d->len[slot] = (uint16_t)n;
        d->count++;
    }
}

static void release(struct dir *d, int64_t t) {
    while (d->count && d->due[d->head] <= t) {
        unsigned char *p = d->buf + (size_t)d->head * SLOT;
        size_t n = d->len[d->head];
        int64_t late = t - d->due[d->head];
        restore_ttl(p, n);
        if (write(d->fd, p, n) < 0) d->write_err++;
        else { d->pkts++; d->bytes += n; }
        if ((uint64_t)late > d->late_ns_max) d->late_ns_max = (uint64_t)late;
        d->late_ns_sum += (uint64_t)late;
        d->head = (d->head + 1) % capacity;
        d->count--;
    }
}

static void write_stats(void) {
    if (!stats_path[0]) return;
    FILE *f = fopen(stats_path, "w");
    if (!f) return;
    fprintf(f, "{\"forwarder\": \"c\", \"version\": \"%s\", \"dirs\": [", VERSION);
    for (int i = 0; i < ndirs; i++) {
        struct dir *d = &dirs[i];
        fprintf(f, "%s{\"tun\": \"%s\", \"packets\": %llu, \"bytes\": %llu, \"drops\": %llu, "
                "\"write_errors\": %llu, \"late_ns_max\": %llu, \"late_ns_mean\": %llu, \"queued\": %u}",
                i ? ", " : "", d->tun, (unsigned long long)d->pkts, (unsigned long long)d->bytes,
                (unsigned long long)d->drops, (unsigned long long)d->write_err,
                (unsigned long long)d->late_ns_max,
                (unsigned long long)(d->pkts ? d->late_ns_sum / d->pkts : 0), d->count);
    }
    fprintf(f, "]}\n");
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: cbfwd CONFIG\n"); return 2; }
    parse(argv[1]);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (rt_prio > 0) {
        struct sched_param sp = {.sched_priority = rt_prio};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) perror("cbfwd: SCHED_FIFO (continuing)");
    }
    mlockall(MCL_CURRENT);
    for (int i = 0; i < ndirs; i++) open_tun(&dirs[i]);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (ep < 0 || tfd < 0 || sfd < 0) die("epoll/timerfd/signalfd");
    struct epoll_event ev = {.events = EPOLLIN};
    for (int i = 0; i < ndirs; i++) {
        ev.data.u32 = (uint32_t)i;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, dirs[i].fd, &ev) < 0) die("epoll_ctl");
    }
    ev.data.u32 = 1000;
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    ev.data.u32 = 1001;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);

    if (ready_path[0]) {
        int fd = open(ready_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) die(ready_path);
        dprintf(fd, "%d\n", getpid());
        close(fd);
    }

    int64_t armed = -1, armed_wake = 0;
    for (;;) {
        int64_t t = now_ns();
        for (int i = 0; i < ndirs; i++) release(&dirs[i], t);
        int64_t next = INT64_MAX;
        for (int i = 0; i < ndirs; i++)
            if (dirs[i].count && dirs[i].due[dirs[i].head] < next) next = dirs[i].due[dirs[i].head];
        if (next != INT64_MAX && next - t <= lead_ns) {
            /* close enough: spinning costs less accuracy than another sleep */
            while (now_ns() < next)
                for (int i = 0; i < ndirs; i++) receive(&dirs[i]);
            continue;
        }
        if (next != armed) {
            struct itimerspec its = {0};
            if (next != INT64_MAX) {
                armed_wake = next - lead_ns;
                its.it_value.tv_sec = armed_wake / 1000000000LL;
                its.it_value.tv_nsec = armed_wake % 1000000000LL;
                if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
            }
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
            armed = next;
        }
        struct epoll_event evs[MAXDIR + 2];
        int n = epoll_wait(ep, evs, MAXDIR + 2, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int k = 0; k < n; k++) {
            uint32_t id = evs[k].data.u32;
            if (id == 1000) {
                uint64_t x;
                if (read(tfd, &x, sizeof x) < 0) { /* spurious: nothing to clear */ }
                int64_t late = now_ns() - armed_wake;
                if (late >= 0) {
                    lead_ns += (late - lead_ns) / 8;
                    if (lead_ns > spin_ns) lead_ns = spin_ns;
                }
                armed = -1;
            } else if (id == 1001) {
                write_stats();
                return 0;
            } else {
                receive(&dirs[id]);
            }
        }
    }
}
