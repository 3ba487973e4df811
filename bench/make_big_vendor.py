#!/usr/bin/env python3
"""Make large rocprofv3 (CSV and rocpd) and nsys traces for bench/analyze_vendor.sh.

    bench/make_big_vendor.py OUT_DIR [--kernels N]

Starts from the hand-written test traces (tests/data/rocprof/, rocpd.sql,
nsys.sql: the vendors' documented schemas) and adds N kernels, one launch
call each, a step range every 1000 kernels, and every fourth kernel an RCCL /
NCCL one overlapping the next. Writes OUT_DIR/csv/rank_0/1_*.csv,
OUT_DIR/rank_0_results.db and OUT_DIR/rank_0.sqlite; not committed.
"""
import argparse
import os
import sqlite3

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data")
NAMES = ["void gemm<float, 128>(float*, float const*, int)", "Cijk_Ailk_Bljk_HHS_BH_MT128x128x32",
         "elementwise_kernel<128, 4>", "ncclDevKernel_AllGather_RING_LL"]


def schedule(n):
    """(i, name index, start ns, end ns, launch start ns) for each kernel."""
    t = 10**15
    for i in range(n):
        k = i % 4
        yield i, k, t, t + (9000 if k == 3 else 5000), t - 3000
        t += 6000


def csv_trace(out, n):
    d = os.path.join(out, "csv", "rank_0")
    os.makedirs(d, exist_ok=True)
    api = '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
    with open(os.path.join(d, "1_kernel_trace.csv"), "w") as k, \
            open(os.path.join(d, "1_hip_api_trace.csv"), "w") as h, \
            open(os.path.join(d, "1_marker_api_trace.csv"), "w") as m:
        k.write(open(os.path.join(SRC, "rocprof", "rank_1", "4242_kernel_trace.csv")).readline())
        h.write(api)
        m.write(api)
        for i, ki, s, e, ls in schedule(n):
            k.write(f'"KERNEL_DISPATCH",2,1,{ki % 2},7,{i},{ki},"{NAMES[ki]}",{i},{s},{e},'
                    '0,0,64,0,32,256,1,1,65536,1,1\n')
            h.write(f'"HIP_RUNTIME_API_EXT","hipLaunchKernel",7,7,{i},{ls},{ls + 500}\n')
            if i % 1000 == 0:
                m.write(f'"MARKER_CORE_RANGE_API","step {i // 1000}",7,7,-1,{ls - 100},'
                        f'{ls + 6000 * 1000 - 200}\n')


def rocpd_trace(out, n):
    db = sqlite3.connect(os.path.join(out, "rank_0_results.db"))
    db.executescript(open(os.path.join(SRC, "rocpd.sql")).read())
    for t in ("kernel_dispatch", "memory_copy", "region", "event"):
        db.execute(f"DELETE FROM rocpd_{t}_0001")
    db.executemany("INSERT INTO rocpd_info_kernel_symbol_0001 (id, nid, pid, code_object_id,"
                   " kernel_name, display_name) VALUES (?, 1, 1, 1, ?, ?)",
                   [(10 + k, nm, nm) for k, nm in enumerate(NAMES)])
    ev, kd, rg = [], [], []
    for i, k, s, e, ls in schedule(n):
        ev += [(2 * i + 1, 7, i), (2 * i + 2, 2, i)]
        kd.append((i + 1, 2, 10 + k, i, 1, 1 + k % 2, s, e, 2 * i + 1))
        rg.append((i + 1, ls, ls + 500, 4, 2 * i + 2))
        if i % 1000 == 0:
            ev.append((2 * n + i + 1, 1, -1))
            rg.append((n + i + 1, ls - 100, ls + 6000 * 1000 - 200, 3, 2 * n + i + 1))
    db.executemany("INSERT INTO rocpd_event_0001 (id, category_id, correlation_id) VALUES (?, ?, ?)", ev)
    db.executemany("INSERT INTO rocpd_kernel_dispatch_0001 (id, nid, pid, tid, agent_id, kernel_id,"
                   " dispatch_id, queue_id, stream_id, start, end, workgroup_size_x, workgroup_size_y,"
                   " workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, event_id)"
                   " VALUES (?, 1, 1, 1, ?, ?, ?, ?, ?, ?, ?, 256, 1, 1, 1024, 1, 1, ?)", kd)
    db.executemany("INSERT INTO rocpd_region_0001 (id, nid, pid, tid, start, end, name_id, event_id)"
                   " VALUES (?, 1, 1, 1, ?, ?, ?, ?)", rg)
    db.execute("UPDATE rocpd_event_0001 SET extdata = json_object('message', 'step ' || ((id - ?) / 1000))"
               " WHERE category_id = 1", (2 * n + 1,))
    db.execute("""UPDATE rocpd_info_process_0001 SET environment = '{"RANK":"0","WORLD_SIZE":"1"}'""")
    db.commit()


def nsys_trace(out, n):
    db = sqlite3.connect(os.path.join(out, "rank_0.sqlite"))
    db.executescript(open(os.path.join(SRC, "nsys.sql")).read())
    for t in ("KIND_KERNEL", "KIND_MEMCPY", "KIND_MEMSET", "KIND_RUNTIME"):
        db.execute(f"DELETE FROM CUPTI_ACTIVITY_{t}")
    db.execute("DELETE FROM NVTX_EVENTS")
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", [(20 + k, nm) for k, nm in enumerate(NAMES)])
    ks, rt, nv = [], [], []
    for i, k, s, e, ls in schedule(n):
        ks.append((s, e, 7 + k % 2, i, 20 + k, 20 + k))
        rt.append((ls, ls + 500, i))
        if i % 1000 == 0:
            nv.append((ls - 100, ls + 6000 * 1000 - 200, f"ProfilerStep#{i // 1000}"))
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,"
                   " correlationId, demangledName, shortName, registersPerThread, gridX, gridY, gridZ,"
                   " blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory,"
                   " localMemoryPerThread, localMemoryTotal, gridId)"
                   " VALUES (?, ?, 0, 1, ?, ?, ?, ?, 64, 1, 1, 1, 256, 1, 1, 0, 0, 0, 0, 0)", ks)
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid,"
                   " correlationId, nameId, returnValue) VALUES (?, ?, 0, (7 << 24) | 7, ?, 5, 0)", rt)
    db.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                   " VALUES (?, ?, 59, ?, (7 << 24) | 7)", nv)
    db.commit()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kernels", type=int, default=1000000)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    csv_trace(a.out, a.kernels)
    rocpd_trace(a.out, a.kernels)
    nsys_trace(a.out, a.kernels)


if __name__ == "__main__":
    main()
