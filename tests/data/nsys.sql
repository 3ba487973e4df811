-- An `nsys export --type sqlite` database, WRITTEN BY HAND: no machine this
-- project can use runs Nsight Systems, so this follows the export schema
-- NVIDIA documents ("SQLite Export Schema Reference", nsys-exporter): the
-- tables the reader uses, with their documented columns (a subset of the
-- kernel table's launch-configuration columns). nsys stores names as ids into
-- StringIds, timestamps in nanoseconds, and packs the process and thread ids
-- into globalTid (thread id = globalTid % 0x1000000).
-- tests/unit/test_read_nsys.c turns this script into a .db file with the
-- SQLite library at test time.

CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER, ctxId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);

INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.11.0');
INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, smCount, uuid) VALUES
  (0, 0, 'NVIDIA H200', '0000:19:00.0', 132, 'GPU-0'), (0, 1, 'NVIDIA H200', '0000:3b:00.0', 132, 'GPU-1');
INSERT INTO StringIds VALUES
  (1, 'ampere_sgemm_128x64_nn'),
  (2, 'void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)'),
  (3, 'ncclDevKernel_ReduceScatter_Sum_f32_RING_LL'),
  (4, 'ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),
  (5, 'cudaLaunchKernel_v7000'), (6, 'cudaMemcpyAsync_v3020'), (7, 'ProfilerStep#7'),
  (8, 'cudaStreamSynchronize_v3020'), (9, 'cudaMemsetAsync_v3020');
-- Process 7000; threads 7001 (main) and 7002.
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, gridId) VALUES
  (2000000000, 2000040000, 0, 1, 7, 501, 7000 << 24, 2, 1, 128, 64, 1, 1, 256, 1, 1, 0, 49152, 0, 0, 11),
  (2000010000, 2000075250, 0, 1, 13, 502, 7000 << 24, 4, 3, 96, 8, 1, 1, 640, 1, 1, 0, 0, 0, 0, 12);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, correlationId, globalPid, bytes, copyKind, srcKind, dstKind) VALUES
  (1999995000, 1999999000, 0, 1, 7, 500, 7000 << 24, 4194304, 1, 1, 3);
INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, correlationId, globalPid, value, bytes) VALUES
  (2000080000, 2000081000, 0, 1, 7, 503, 7000 << 24, 0, 65536);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) VALUES
  (1999994000, 1999994500, 0, (7000 << 24) | 7001, 500, 6, 0),
  (1999996000, 1999996400, 0, (7000 << 24) | 7001, 501, 5, 0),
  (1999997000, 1999997300, 0, (7000 << 24) | 7002, 502, 5, 0),
  (2000079000, 2000079200, 0, (7000 << 24) | 7001, 503, 9, 0),
  (2000082000, 2000090000, 0, (7000 << 24) | 7001, 504, 8, 0);
-- eventType 59 NvtxPushPopRange, 60 NvtxStartEndRange, 34 NvtxMark.
INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES
  (1999990000, 2000100000, 59, NULL, (7000 << 24) | 7001, 7),
  (2000000000, 2000050000, 59, 'forward', (7000 << 24) | 7001, NULL),
  (2000060000, NULL, 34, 'a mark', (7000 << 24) | 7001, NULL),
  (2000070000, NULL, 59, 'never closed', (7000 << 24) | 7001, NULL),
  (2000100000, 2000200000, 60, 'step 8', (7000 << 24) | 7002, NULL);
