/*
 * standalone.c - a libFuzzer-compatible driver for machines without clang:
 * runs LLVMFuzzerTestOneInput on the files given, or on random inputs.
 *
 *   fuzz_X [-seconds=S] [-runs=N] [-seed=N] [-max_len=N] [FILE|DIR...]
 *
 * Random inputs are biased toward the protocols' special bytes (header,
 * trailer, 0x00, 0xFF) so they reach the receivers' rare paths. A failing
 * input is written to crash-<seed>-<run>.bin when a check aborts, so it can
 * be replayed by passing the file (a sanitizer report names the seed and
 * run: -seed=S -runs=R+1 reproduces it).
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: fast, good enough, reproducible from -seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

static const uint8_t *cur_data;
static size_t cur_size;
static char crash_name[64];

static void on_abort(int sig)
{
    int fd;
    if (cur_data != NULL && crash_name[0] != '\0') {
        fd = open(crash_name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            ssize_t w = write(fd, cur_data, cur_size);
            (void)w;
            close(fd);
            w = write(2, "input written to ", 17);
            w = write(2, crash_name, strlen(crash_name));
            w = write(2, "\n", 1);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static const uint8_t special[] = {0xAA, 0x55, 0xFE, 0xEF, 0xFD, 0xDF, 0xFF, 0x00, 0x01, 0x7F};

static size_t run_file(const char *path)
{
    static uint8_t buf[1 << 20];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 1;
}

static size_t run_path(const char *path)
{
    struct stat st;
    size_t runs = 0;
    if (stat(path, &st) != 0) {
        perror(path);
        exit(2);
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char full[4096];
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            snprintf(full, sizeof full, "%s/%s", path, e->d_name);
            runs += run_file(full);
        }
        if (d != NULL) {
            closedir(d);
        }
        return runs;
    }
    return run_file(path);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static uint8_t buf[1 << 16];
    double seconds = 0;
    unsigned long runs = 0, max_runs = 0, seed = 1, max_len = 4096;
    int files = 0;
    int i;
    double t0;

    for (i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-seconds=", 9) == 0 || strncmp(argv[i], "-max_total_time=", 16) == 0) {
            seconds = atof(strchr(argv[i], '=') + 1);
        } else if (strncmp(argv[i], "-runs=", 6) == 0) {
            max_runs = strtoul(argv[i] + 6, NULL, 10);
        } else if (strncmp(argv[i], "-seed=", 6) == 0) {
            seed = strtoul(argv[i] + 6, NULL, 10);
        } else if (strncmp(argv[i], "-max_len=", 9) == 0) {
            max_len = strtoul(argv[i] + 9, NULL, 10);
            if (max_len == 0 || max_len > sizeof buf) {
                max_len = sizeof buf;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 2;
        } else {
            runs += run_path(argv[i]);
            files = 1;
        }
    }
    if (files) {
        printf("fuzz: %lu inputs replayed, no failure\n", runs);
        return 0;
    }
    if (seconds <= 0 && max_runs == 0) {
        seconds = 10;
    }
    signal(SIGABRT, on_abort);
    rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed;
    printf("fuzz: seed %lu\n", seed);
    fflush(stdout);
    t0 = now_s();
    for (;;) {
        size_t n, k;
        if (max_runs != 0 && runs >= max_runs) {
            break;
        }
        if (seconds > 0 && (runs & 63u) == 0 && now_s() - t0 >= seconds) {
            break;
        }
        n = (size_t)(rng() % max_len);
        for (k = 0; k < n; k++) {
            uint64_t r = rng();
            buf[k] = (r & 3u) == 0 ? special[(r >> 8) % sizeof special] : (uint8_t)(r >> 16);
        }
        cur_data = buf;
        cur_size = n;
        snprintf(crash_name, sizeof crash_name, "crash-%lu-%lu.bin", seed, runs);
        LLVMFuzzerTestOneInput(buf, n);
        runs++;
    }
    printf("fuzz: %lu runs in %.1f s (seed %lu), no failure\n", runs, now_s() - t0, seed);
    return 0;
}
