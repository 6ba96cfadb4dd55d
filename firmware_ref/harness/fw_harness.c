/*
 * fw_harness.c - the reference firmware as a host program: it plays the
 * STM32 base (and the action-frame main controller) over a tty, so the host
 * tools can talk to compiled firmware through a pty.
 *
 *   fw_harness [options] TTY
 *     --rate HZ          odometry frames per second (default 50; 0: none)
 *     --action PATH      action frames on their own tty (default: on TTY too)
 *     --no-action        no action-frame receiver
 *     --crc NAME         action-frame CRC-16 preset (default crc-ccitt-false)
 *     --max-len N        largest action data length (default 1024)
 *     --cmd-timeout MS   command watchdog: zero velocity after MS ms without a
 *                        command (default FW_CMD_TIMEOUT_MS, 500; 0: keep the
 *                        last command, as the seed firmware)
 *     --duration S       exit after S seconds (default 0: run until a signal)
 *
 * Command frames set the velocity (a non-finite or implausible one is refused
 * and counted, fw_cmd_plausible); odometry reports it, with the yaw
 * integrated from wz (degrees). Action requests are answered by the
 * responder (ACK, NAK for rejected candidates, UNKNOWN_SUB). SIGUSR1 prints
 * the counters; SIGINT/SIGTERM (or the other end hanging up) prints them and
 * exits 0. Counters are one JSON object per line on stderr.
 *
 * The firmware code is the same as on the board: only this file knows about
 * file descriptors and clocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "fw_action.h"
#include "fw_crc16.h"
#include "fw_sum8.h"

#define MAX_LEN_LIMIT 0xFFFFu

static volatile sig_atomic_t stop_flag = 0;
static volatile sig_atomic_t report_flag = 0;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void on_report(int sig)
{
    (void)sig;
    report_flag = 1;
}

typedef struct {
    int fd;
    uint32_t tx_bytes;
    uint32_t tx_dropped; /* the other end did not read: like a UART, drop */
} link_t;

typedef struct {
    link_t base;
    link_t action;      /* fd == base.fd when multiplexed, -1 when off */
    fw_sum8_rx cmd_rx;
    fw_crc16 crc;
    fw_action_rx act_rx;
    fw_responder resp;
    fw_cmd cmd;
    fw_watchdog watchdog;
    double yaw_deg;
    uint32_t cmd_applied;
    uint32_t cmd_rejected; /* checksum-valid but not finite or beyond the limits */
    uint32_t odom_sent;
    uint32_t watchdog_trips;
} harness_t;

static uint8_t act_buf[FW_ACTION_RX_BUF_SIZE(MAX_LEN_LIMIT)];
static uint8_t keep_buf[MAX_LEN_LIMIT];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The board's millisecond tick (HAL_GetTick()), wrapping like it. */
static uint32_t tick_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint32_t)((unsigned long long)ts.tv_sec * 1000u
                      + (unsigned long long)ts.tv_nsec / 1000000u);
}

/* The board's transmit callback: a non-blocking write. */
static void tx_write(void *ctx, const uint8_t *data, size_t len)
{
    link_t *l = ctx;
    while (len > 0) {
        ssize_t n = write(l->fd, data, len);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            l->tx_dropped += (uint32_t)len;
            return;
        }
        l->tx_bytes += (uint32_t)n;
        data += n;
        len -= (size_t)n;
    }
}

static harness_t H;

static void on_action_frame(void *ctx, const fw_action_frame *f, fw_pos_t offset)
{
    harness_t *h = ctx;
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n;
    (void)offset;
    n = fw_responder_answer(&h->resp, f, FW_STATUS_AUTO, ans, NULL);
    if (n != 0) {
        tx_write(&h->action, ans, n);
    }
}

static void on_action_reject(void *ctx, const fw_action_reject *r)
{
    harness_t *h = ctx;
    uint8_t ans[FW_ACTION_ANSWER_SIZE];
    size_t n = fw_responder_answer_rejected(&h->resp, r, ans);
    if (n != 0) {
        tx_write(&h->action, ans, n);
    }
}

static void on_cmd_frame(void *ctx, const uint8_t *frame, fw_pos_t offset)
{
    harness_t *h = ctx;
    fw_cmd c;
    (void)offset;
    fw_cmd_decode(frame, &c);
    if (!fw_cmd_plausible(&c)) {
        h->cmd_rejected++; /* the base keeps its velocity; the watchdog is not fed */
        return;
    }
    h->cmd_applied++;
    h->cmd = c;
    fw_watchdog_feed(&h->watchdog, tick_ms());
}

static int open_tty(const char *path)
{
    struct termios t;
    int fd = open(path, O_RDWR | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        perror(path);
        return -1;
    }
    if (tcgetattr(fd, &t) == 0) {
        /* Raw 8N1, no echo, no translation (what cfmakeraw does; POSIX only). */
        t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
        t.c_oflag &= ~(tcflag_t)OPOST;
        t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
        t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
        t.c_cflag |= CS8;
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        tcsetattr(fd, TCSANOW, &t);
    }
    return fd;
}

static void report(const harness_t *h)
{
    const fw_sum8_stats *c = &h->cmd_rx.stats;
    const fw_action_stats *a = &h->act_rx.stats;
    const fw_responder_stats *r = &h->resp.stats;
    fprintf(stderr,
            "{\"odom_sent\": %lu, \"watchdog_trips\": %lu, \"cmd_applied\": %lu, "
            "\"cmd_rejected\": %lu, \"tx_bytes\": %lu, "
            "\"tx_dropped\": %lu, "
            "\"cmd\": {\"frames\": %lu, \"bytes\": %lu, \"checksum_errors\": %lu, "
            "\"discarded\": %lu, \"resyncs\": %lu, \"nonfinite\": %lu, \"overlapping\": %lu}, "
            "\"last_cmd\": [%.9g, %.9g, %.9g], "
            "\"action\": {\"frames\": %lu, \"bytes\": %lu, \"discarded\": %lu, "
            "\"resyncs\": %lu, \"header_errors\": %lu, \"length_errors\": %lu, "
            "\"trailer_errors\": %lu, \"checksum_errors\": %lu, \"truncated\": %lu, "
            "\"relaxed_accepts\": %lu}, "
            "\"responder\": {\"answered\": %lu, \"acks\": %lu, \"naks\": %lu, "
            "\"duplicates\": %lu}}\n",
            (unsigned long)h->odom_sent, (unsigned long)h->watchdog_trips,
            (unsigned long)h->cmd_applied, (unsigned long)h->cmd_rejected,
            (unsigned long)(h->base.tx_bytes + h->action.tx_bytes),
            (unsigned long)(h->base.tx_dropped + h->action.tx_dropped),
            (unsigned long)c->frames, (unsigned long)c->bytes, (unsigned long)c->checksum_errors,
            (unsigned long)c->discarded, (unsigned long)c->resyncs, (unsigned long)c->nonfinite,
            (unsigned long)c->overlapping, (double)h->cmd.vx, (double)h->cmd.vy,
            (double)h->cmd.wz, (unsigned long)a->frames, (unsigned long)a->bytes,
            (unsigned long)a->discarded, (unsigned long)a->resyncs,
            (unsigned long)a->header_errors, (unsigned long)a->length_errors,
            (unsigned long)a->trailer_errors, (unsigned long)a->checksum_errors,
            (unsigned long)a->truncated, (unsigned long)a->relaxed_accepts,
            (unsigned long)r->answered, (unsigned long)r->acks, (unsigned long)r->naks,
            (unsigned long)r->duplicates);
    fflush(stderr);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fw_harness [--rate HZ] [--action PATH | --no-action] [--crc NAME]\n"
            "                  [--max-len N] [--cmd-timeout MS] [--duration S] TTY\n");
}

/* Read what is there; returns -1 when the other end hung up. */
static int pump(int fd, int base, int action)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            if (base) {
                fw_sum8_rx_feed(&H.cmd_rx, buf, (size_t)n, on_cmd_frame, &H);
            }
            if (action) {
                fw_action_rx_feed(&H.act_rx, buf, (size_t)n);
            }
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return 0;
        }
        return -1; /* 0: end of file; EIO: the pty's master side closed */
    }
}

static void check_watchdog(harness_t *h)
{
    if (fw_watchdog_expired(&h->watchdog, tick_ms())) {
        /* The host went quiet: stop the base. */
        h->cmd.vx = h->cmd.vy = h->cmd.wz = 0.0f;
        h->watchdog_trips++;
    }
}

/* fw_wrap_deg in double (the harness has libm: fmod, exact for any finite angle):
 * constant time, [-180, 180), not finite -> 0. */
static double wrap_deg(double deg)
{
    double r;
    if (!(deg >= -DBL_MAX && deg <= DBL_MAX)) {
        return 0.0;
    }
    r = fmod(deg, 360.0);
    if (r >= 180.0) {
        r -= 360.0;
    } else if (r < -180.0) {
        r += 360.0;
    }
    return r;
}

static void send_odom(harness_t *h, double dt)
{
    fw_odom o;
    const double pi = 3.14159265358979323846;
    h->yaw_deg = wrap_deg(h->yaw_deg + (double)h->cmd.wz * dt * 180.0 / pi);
    o.vx = h->cmd.vx;
    o.vy = h->cmd.vy;
    o.wz = h->cmd.wz;
    o.yaw_deg = (float)h->yaw_deg;
    fw_odom_send(&o, tx_write, &h->base);
    h->odom_sent++;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *tty = NULL;
    const char *action_path = NULL;
    const char *crc_name = FW_CRC16_DEFAULT;
    int no_action = 0;
    double rate = 50.0;
    double max_len = FW_ACTION_MAX_LEN_DEFAULT;
    double cmd_timeout_ms = FW_CMD_TIMEOUT_MS;
    double duration = 0.0;
    double t0, next_odom, last_odom;
    struct sigaction sa;
    int i;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (strcmp(a, "--no-action") == 0) {
            no_action = 1;
            continue;
        }
        if (a[0] == '-' && a[1] == '-' && v == NULL) {
            usage();
            return 2;
        }
        if (strcmp(a, "--rate") == 0) {
            bad = parse_num(v, 0.0, 10000.0, &rate);
        } else if (strcmp(a, "--action") == 0) {
            action_path = v;
        } else if (strcmp(a, "--crc") == 0) {
            crc_name = v;
        } else if (strcmp(a, "--max-len") == 0) {
            bad = parse_num(v, 0.0, (double)MAX_LEN_LIMIT, &max_len);
        } else if (strcmp(a, "--cmd-timeout") == 0) {
            bad = parse_num(v, 0.0, 1e9, &cmd_timeout_ms);
        } else if (strcmp(a, "--duration") == 0) {
            bad = parse_num(v, 0.0, 1e9, &duration);
        } else if (a[0] == '-' || tty != NULL) {
            usage();
            return 2;
        } else {
            tty = a;
            continue;
        }
        if (bad) {
            fprintf(stderr, "fw_harness: bad value for %s: %s\n", a, v);
            return 2;
        }
        i++;
    }
    if (tty == NULL) {
        usage();
        return 2;
    }
    if (fw_crc16_init_name(&H.crc, crc_name) != 0) {
        fprintf(stderr, "fw_harness: unknown CRC preset %s\n", crc_name);
        return 2;
    }

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_report;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    H.base.fd = open_tty(tty);
    if (H.base.fd < 0) {
        return 1;
    }
    if (no_action) {
        H.action.fd = -1;
    } else if (action_path != NULL && strcmp(action_path, tty) != 0) {
        H.action.fd = open_tty(action_path);
        if (H.action.fd < 0) {
            return 1;
        }
    } else {
        H.action.fd = H.base.fd;
    }
    fw_sum8_rx_init(&H.cmd_rx, FW_CMD_SIZE);
    fw_action_rx_init(&H.act_rx, &H.crc, act_buf, sizeof act_buf, (uint16_t)max_len,
                      on_action_frame, on_action_reject, &H);
    fw_responder_init(&H.resp, &H.crc, keep_buf, sizeof keep_buf);
    fw_watchdog_init(&H.watchdog, (uint32_t)cmd_timeout_ms);

    fprintf(stderr, "fw_harness: ready on %s\n", tty);
    fflush(stderr);
    t0 = last_odom = now_s();
    next_odom = rate > 0 ? t0 + 1.0 / rate : 0.0;
    while (!stop_flag) {
        struct pollfd fds[2];
        nfds_t nfds = 0;
        int timeout_ms = 200;
        double t = now_s();
        int k;
        if (duration > 0 && t - t0 >= duration) {
            break;
        }
        if (rate > 0) {
            double wait = next_odom - t;
            timeout_ms = wait <= 0 ? 0 : (int)(wait * 1000.0) + 1;
        }
        fds[nfds].fd = H.base.fd;
        fds[nfds++].events = POLLIN;
        if (H.action.fd >= 0 && H.action.fd != H.base.fd) {
            fds[nfds].fd = H.action.fd;
            fds[nfds++].events = POLLIN;
        }
        if (poll(fds, nfds, timeout_ms) < 0 && errno != EINTR) {
            perror("poll");
            break;
        }
        if (report_flag) {
            report_flag = 0;
            report(&H);
        }
        for (k = 0; k < (int)nfds; k++) {
            int is_base = fds[k].fd == H.base.fd;
            int is_action = fds[k].fd == H.action.fd;
            if (fds[k].revents == 0) {
                continue;
            }
            if (pump(fds[k].fd, is_base, is_action) < 0) {
                stop_flag = 1;
            }
        }
        check_watchdog(&H);
        t = now_s();
        if (rate > 0 && t >= next_odom) {
            send_odom(&H, t - last_odom);
            last_odom = t;
            next_odom += 1.0 / rate;
            if (next_odom < t) {
                next_odom = t + 1.0 / rate; /* fell behind: do not burst */
            }
        }
    }
    report(&H);
    return 0;
}
