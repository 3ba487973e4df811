/* Streams, events, copies and host callbacks of the CUDA device backend:
 * - device info is filled in;
 * - stream priorities are clamped to the device's range and read back;
 * - events time a known workload (a 256 MiB device copy): elapsed > 0;
 * - ao_stream_wait_event orders two streams (checked without kernels: a host
 *   callback that sleeps and then sets a flag, a memset behind it, and a
 *   callback plus a copy on the waiting stream that must see both);
 * - ao_launch_host copies its argument;
 * - ao_stream_hold keeps an event behind it incomplete until the release,
 *   twice in a row;
 * - the SM copy kernel at sizes 1, 15, 16, 17, 4 KiB+5, 1 MiB+3, 64 MiB with
 *   matching and mismatching misalignments, guard bytes untouched, and from
 *   pinned host memory;
 * - peer copies both ways when two devices are visible. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runtime/device.h"

static void test_info(ao_device *dev)
{
    ao_device_info info;
    ao_device_get_info(dev, &info);
    printf("device: %s (%s) sm=%d cc=%d.%d mem=%zu MiB runtime %s driver %s priorities %d..%d\n",
           info.name, info.pci_bus_id, info.sm_count, info.cc_major, info.cc_minor,
           info.total_mem >> 20, info.runtime_version, info.driver_version, info.priority_least,
           info.priority_greatest);
    CHECK(strcmp(info.backend, "cuda") == 0, "backend %s", info.backend);
    CHECK(info.name[0] != '\0', "empty device name");
    CHECK(info.pci_bus_id[0] != '\0', "empty PCI bus id");
    CHECK(info.sm_count > 0, "sm_count %d", info.sm_count);
    CHECK(info.total_mem > 0, "total_mem 0");
    CHECK(info.priority_greatest <= info.priority_least, "priority range %d..%d",
          info.priority_least, info.priority_greatest);
    CHECK(strcmp(info.driver_version, "none") != 0, "driver version missing");
    CHECK(ao_device_supports(dev, AO_F32) && ao_device_supports(dev, AO_F16),
          "fp32/fp16 unsupported");
    CHECK(!ao_device_supports(dev, AO_I8), "int8 GEMMs claimed");
}

static void test_priorities(ao_device *dev)
{
    ao_device_info info;
    ao_device_get_info(dev, &info);
    ao_stream *hi = ao_stream_create(dev, "allgather", -1000);
    ao_stream *lo = ao_stream_create(dev, "compute", 1000);
    ao_stream *mid = ao_stream_create(dev, "h2d", info.priority_least);
    CHECK(ao_stream_priority(hi) == info.priority_greatest, "high priority read back %d, want %d",
          ao_stream_priority(hi), info.priority_greatest);
    CHECK(ao_stream_priority(lo) == info.priority_least, "low priority read back %d, want %d",
          ao_stream_priority(lo), info.priority_least);
    CHECK(ao_stream_priority(mid) == info.priority_least, "priority %d read back %d",
          info.priority_least, ao_stream_priority(mid));
    CHECK(strcmp(ao_stream_name(hi), "allgather") == 0, "name %s", ao_stream_name(hi));
    ao_stream_destroy(hi);
    ao_stream_destroy(lo);
    ao_stream_destroy(mid);
}

static void test_events(ao_device *dev, ao_stream *s)
{
    const size_t bytes = (size_t)256 << 20;
    void *a = ao_dev_alloc(dev, bytes), *b = ao_dev_alloc(dev, bytes);
    ao_event *start = ao_event_create(dev), *end = ao_event_create(dev);
    ao_memset_async(dev, a, 1, bytes, s);
    ao_event_record(start, s);
    ao_copy_async(dev, b, a, bytes, AO_D2D, s);
    ao_event_record(end, s);
    ao_event_sync(end);
    CHECK(ao_event_query(end) == 1, "event not complete after ao_event_sync");
    const double us = ao_event_elapsed_us(start, end);
    printf("256 MiB device copy: %.1f us (%.0f GB/s)\n", us, us > 0 ? 2.0 * bytes / us / 1e3 : 0);
    CHECK(us > 0 && us < 5e6, "elapsed %.3f us for a 256 MiB copy", us);
    ao_event_destroy(start);
    ao_event_destroy(end);
    ao_dev_free(dev, a);
    ao_dev_free(dev, b);
}

struct order_state {
    atomic_int flag;
    atomic_int seen;
};

static void test_hold(ao_device *dev, ao_stream *s)
{
    ao_event *e = ao_event_create(dev);
    for (int round = 0; round < 2; round++) {
        ao_stream_hold(s);
        ao_event_record(e, s);
        usleep(50000);
        CHECK(ao_event_query(e) == 0,
              "round %d: an event behind a held stream completed before the release", round);
        ao_stream_release(s);
        ao_event_sync(e);
        CHECK(ao_event_query(e) == 1, "round %d: event incomplete after the release", round);
    }
    ao_stream_release(s); /* not held: nothing to do */
    ao_event_destroy(e);
}

static void sleep_then_set(void *arg)
{
    struct order_state *st = *(struct order_state **)arg;
    usleep(200 * 1000);
    atomic_store(&st->flag, 1);
}

static void observe(void *arg)
{
    struct order_state *st = *(struct order_state **)arg;
    atomic_store(&st->seen, atomic_load(&st->flag));
}

static void test_wait_event(ao_device *dev)
{
    const size_t bytes = (size_t)4 << 20;
    ao_stream *s1 = ao_stream_create(dev, "first", 0), *s2 = ao_stream_create(dev, "second", 0);
    unsigned char *x = ao_dev_alloc(dev, bytes), *y = ao_dev_alloc(dev, bytes);
    unsigned char *host = ao_host_alloc(dev, bytes);
    ao_memset_async(dev, x, 0, bytes, s1);
    ao_memset_async(dev, y, 0, bytes, s1);
    ao_stream_sync(s1);

    struct order_state st;
    atomic_init(&st.flag, 0);
    atomic_init(&st.seen, -1);
    struct order_state *p = &st;
    ao_event *e = ao_event_create(dev);
    ao_launch_host(s1, sleep_then_set, &p, sizeof p);
    ao_memset_async(dev, x, 0x5a, bytes, s1);
    ao_event_record(e, s1);
    ao_stream_wait_event(s2, e);
    ao_launch_host(s2, observe, &p, sizeof p);
    ao_copy_async(dev, y, x, bytes, AO_D2D, s2);
    ao_copy_async(dev, host, y, bytes, AO_D2H, s2);
    ao_stream_sync(s2);
    CHECK(atomic_load(&st.seen) == 1, "second stream ran before the event (saw flag %d)",
          atomic_load(&st.seen));
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += host[i] != 0x5a;
    CHECK(bad == 0, "%zu bytes copied before the first stream's memset", bad);
    ao_stream_sync(s1);
    ao_event_destroy(e);
    ao_host_free(dev, host);
    ao_dev_free(dev, x);
    ao_dev_free(dev, y);
    ao_stream_destroy(s1);
    ao_stream_destroy(s2);
}

struct host_arg {
    int value;
    atomic_int *out;
};

static void record_value(void *arg)
{
    const struct host_arg *a = arg;
    atomic_store(a->out, a->value);
}

static void pause_100ms(void *arg)
{
    (void)arg;
    usleep(100 * 1000);
}

static void test_launch_host_copies_arg(ao_stream *s)
{
    atomic_int out;
    atomic_init(&out, 0);
    struct host_arg arg = {42, &out};
    ao_launch_host(s, pause_100ms, NULL, 0); /* arg changes before it runs */
    ao_launch_host(s, record_value, &arg, sizeof arg);
    arg.value = 7; /* the callback must still see 42 */
    ao_stream_sync(s);
    CHECK(atomic_load(&out) == 42, "callback saw %d, want the copied 42", atomic_load(&out));
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 131u + 7u) & 0xffu);
}

/* Copies `size` bytes from src+so to dst+do_ with the SM kernel; src is device
 * memory or pinned host memory. */
static void check_sm_copy(ao_device *dev, ao_stream *s, size_t size, size_t do_, size_t so,
                          int pinned_src)
{
    const size_t total = size + 64;
    unsigned char *host = ao_host_alloc(dev, total);
    unsigned char *src_host = pinned_src ? ao_host_alloc(dev, total) : NULL;
    unsigned char *src = pinned_src ? src_host : ao_dev_alloc(dev, total);
    unsigned char *dst = ao_dev_alloc(dev, total);
    for (size_t i = 0; i < total; i++) host[i] = pattern(i);
    if (pinned_src)
        memcpy(src_host, host, total);
    else
        ao_copy_async(dev, src, host, total, AO_H2D, s);
    ao_memset_async(dev, dst, 0xee, total, s);
    ao_copy_sm_async(dev, dst + do_, src + so, size, s);
    ao_copy_async(dev, host, dst, total, AO_D2H, s);
    ao_stream_sync(s);
    size_t wrong = 0, guard = 0;
    for (size_t i = 0; i < total; i++) {
        if (i >= do_ && i < do_ + size)
            wrong += host[i] != pattern(i - do_ + so);
        else
            guard += host[i] != 0xee;
    }
    CHECK(wrong == 0 && guard == 0,
          "SM copy of %zu bytes (dst+%zu, src+%zu, %s): %zu wrong, %zu guard bytes changed", size,
          do_, so, pinned_src ? "pinned host source" : "device source", wrong, guard);
    ao_host_free(dev, host);
    if (pinned_src)
        ao_host_free(dev, src_host);
    else
        ao_dev_free(dev, src);
    ao_dev_free(dev, dst);
}

static void test_copy_sm(ao_device *dev, ao_stream *s)
{
    const size_t sizes[] = {1, 15, 16, 17, 4096 + 5, ((size_t)1 << 20) + 3, (size_t)64 << 20};
    const size_t offsets[][2] = {{0, 0}, {1, 1}, {3, 1}, {8, 0}, {15, 15}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
            check_sm_copy(dev, s, sizes[i], offsets[o][0], offsets[o][1], 0);
    check_sm_copy(dev, s, ((size_t)1 << 20) + 3, 0, 0, 1);
    check_sm_copy(dev, s, 4096 + 5, 5, 5, 1);

    /* Timed: the SM kernel moves a large buffer at a plausible rate. */
    const size_t bytes = (size_t)256 << 20;
    void *a = ao_dev_alloc(dev, bytes), *b = ao_dev_alloc(dev, bytes);
    ao_event *e0 = ao_event_create(dev), *e1 = ao_event_create(dev);
    ao_copy_sm_async(dev, b, a, bytes, s); /* warm-up */
    ao_event_record(e0, s);
    ao_copy_sm_async(dev, b, a, bytes, s);
    ao_event_record(e1, s);
    ao_event_sync(e1);
    const double us = ao_event_elapsed_us(e0, e1);
    printf("SM copy 256 MiB: %.1f us (%.0f GB/s read+write)\n", us, 2.0 * bytes / us / 1e3);
    CHECK(us > 0, "SM copy took %.3f us", us);
    ao_event_destroy(e0);
    ao_event_destroy(e1);
    ao_dev_free(dev, a);
    ao_dev_free(dev, b);
}

static void peer_copy_one_way(ao_device *dst_dev, ao_device *src_dev, ao_stream *s, int value)
{
    const size_t bytes = ((size_t)8 << 20) + 3;
    unsigned char *src = ao_dev_alloc(src_dev, bytes), *dst = ao_dev_alloc(dst_dev, bytes);
    unsigned char *host = malloc(bytes);
    ao_stream *ss = ao_stream_create(src_dev, "fill", 0);
    ao_memset_async(src_dev, src, value, bytes, ss);
    ao_stream_sync(ss);
    ao_copy_peer_async(dst_dev, dst, src_dev, src, bytes, s);
    ao_stream_sync(s);
    ao_stream *ds = ao_stream_create(dst_dev, "check", 0);
    ao_copy_async(dst_dev, host, dst, bytes, AO_D2H, ds);
    ao_stream_sync(ds);
    ao_stream_destroy(ds);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += host[i] != (unsigned char)value;
    CHECK(bad == 0, "peer copy: %zu of %zu bytes wrong", bad, bytes);
    free(host);
    ao_stream_destroy(ss);
    ao_dev_free(src_dev, src);
    ao_dev_free(dst_dev, dst);
}

static void test_peer(ao_device *dev0)
{
    if (ao_device_count("cuda") < 2) {
        printf("one device: peer copy not tested\n");
        return;
    }
    ao_device *dev1 = ao_device_open("cuda", 1);
    CHECK(dev1 != NULL, "cannot open cuda:1");
    if (!dev1) return;
    ao_stream *s0 = ao_stream_create(dev0, "p2p0", 0), *s1 = ao_stream_create(dev1, "p2p1", 0);
    peer_copy_one_way(dev0, dev1, s0, 0x33); /* pulled by device 0 */
    peer_copy_one_way(dev1, dev0, s1, 0x44); /* pulled by device 1 */
    peer_copy_one_way(dev1, dev0, s0, 0x55); /* pushed by device 0 */
    ao_stream_destroy(s0);
    ao_stream_destroy(s1);
    ao_device_close(dev1);
}

int main(void)
{
    GPU_SKIP_UNLESS(ao_device_count("cuda") > 0, "no CUDA device visible");
    ao_device *dev = ao_device_open("cuda", 0);
    CHECK(dev != NULL, "cannot open cuda:0");
    if (!dev) return check_result("test_streams_cuda");
    ao_stream *s = ao_stream_create(dev, "test", 0);

    test_info(dev);
    test_priorities(dev);
    test_events(dev, s);
    test_wait_event(dev);
    test_launch_host_copies_arg(s);
    test_hold(dev, s);
    test_copy_sm(dev, s);
    test_peer(dev);
    ao_range_push(dev, "test_range");
    ao_range_pop(dev);

    ao_stream_destroy(s);
    ao_device_close(dev);
    return check_result("test_streams_cuda");
}
