-- A rocprofv3 rocpd database (schema 3.0), WRITTEN BY HAND: no machine this
-- project can use runs rocprofv3, so this follows the schema rocprofiler-sdk
-- documents in source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql and
-- rocpd_views.sql: every table carries a per-session suffix ({{uuid}}, here
-- _0001) and a view without it is what readers query. Only the tables the
-- reader touches are created; their columns are the documented ones.
-- tests/unit/test_read_rocprof.c turns this script into a .db file with the
-- SQLite library at test time. Timestamps are nanoseconds.

CREATE TABLE rocpd_metadata_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, tag TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE rocpd_string_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, string TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE rocpd_info_node_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, hash BIGINT NOT NULL UNIQUE, machine_id TEXT NOT NULL UNIQUE, system_name TEXT, hostname TEXT, release TEXT, version TEXT, hardware_name TEXT, domain_name TEXT);
CREATE TABLE rocpd_info_process_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, ppid INTEGER, pid INTEGER NOT NULL, init BIGINT, fini BIGINT, start BIGINT, end BIGINT, command TEXT, environment JSONB DEFAULT '{}' NOT NULL, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_info_thread_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, ppid INTEGER, pid INTEGER NOT NULL, tid INTEGER NOT NULL, name TEXT, start BIGINT, end BIGINT, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_info_agent_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, type TEXT CHECK (type IN ('CPU', 'GPU', 'NIC')), absolute_index INTEGER, logical_index INTEGER, type_index INTEGER, uuid INTEGER, name TEXT, model_name TEXT, vendor_name TEXT, product_name TEXT, user_name TEXT, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_info_queue_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, name TEXT, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_info_stream_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, name TEXT, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_info_kernel_symbol_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, code_object_id INTEGER NOT NULL, kernel_name TEXT, display_name TEXT, kernel_object INTEGER, kernarg_segment_size INTEGER, kernarg_segment_alignment INTEGER, group_segment_size INTEGER, private_segment_size INTEGER, sgpr_count INTEGER, arch_vgpr_count INTEGER, accum_vgpr_count INTEGER, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_event_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, category_id INTEGER, stack_id INTEGER, parent_stack_id INTEGER, correlation_id INTEGER, call_stack JSONB DEFAULT '{}' NOT NULL, line_info JSONB DEFAULT '{}' NOT NULL, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_region_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL, start BIGINT NOT NULL, end BIGINT NOT NULL, name_id INTEGER NOT NULL, event_id INTEGER, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_kernel_dispatch_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER, agent_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL, dispatch_id INTEGER NOT NULL, queue_id INTEGER NOT NULL, stream_id INTEGER NOT NULL, start BIGINT NOT NULL, end BIGINT NOT NULL, private_segment_size INTEGER, group_segment_size INTEGER, workgroup_size_x INTEGER NOT NULL, workgroup_size_y INTEGER NOT NULL, workgroup_size_z INTEGER NOT NULL, grid_size_x INTEGER NOT NULL, grid_size_y INTEGER NOT NULL, grid_size_z INTEGER NOT NULL, region_name_id INTEGER, event_id INTEGER, extdata JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE rocpd_memory_copy_0001 (id INTEGER PRIMARY KEY AUTOINCREMENT, guid TEXT DEFAULT 'g1' NOT NULL, nid INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER, start BIGINT NOT NULL, end BIGINT NOT NULL, name_id INTEGER NOT NULL, dst_agent_id INTEGER, dst_address INTEGER, src_agent_id INTEGER, src_address INTEGER, size INTEGER NOT NULL, queue_id INTEGER, stream_id INTEGER, region_name_id INTEGER, event_id INTEGER, extdata JSONB DEFAULT '{}' NOT NULL);

CREATE VIEW rocpd_metadata AS SELECT * FROM rocpd_metadata_0001;
CREATE VIEW rocpd_string AS SELECT * FROM rocpd_string_0001;
CREATE VIEW rocpd_info_node AS SELECT * FROM rocpd_info_node_0001;
CREATE VIEW rocpd_info_process AS SELECT * FROM rocpd_info_process_0001;
CREATE VIEW rocpd_info_thread AS SELECT * FROM rocpd_info_thread_0001;
CREATE VIEW rocpd_info_agent AS SELECT * FROM rocpd_info_agent_0001;
CREATE VIEW rocpd_info_queue AS SELECT * FROM rocpd_info_queue_0001;
CREATE VIEW rocpd_info_stream AS SELECT * FROM rocpd_info_stream_0001;
CREATE VIEW rocpd_info_kernel_symbol AS SELECT * FROM rocpd_info_kernel_symbol_0001;
CREATE VIEW rocpd_event AS SELECT * FROM rocpd_event_0001;
CREATE VIEW rocpd_region AS SELECT * FROM rocpd_region_0001;
CREATE VIEW rocpd_kernel_dispatch AS SELECT * FROM rocpd_kernel_dispatch_0001;
CREATE VIEW rocpd_memory_copy AS SELECT * FROM rocpd_memory_copy_0001;

INSERT INTO rocpd_metadata_0001 (tag, value) VALUES ('schema_version', '3');
INSERT INTO rocpd_string_0001 (id, string) VALUES
  (1, 'MARKER_CORE_RANGE_API'), (2, 'HIP_RUNTIME_API_EXT'), (3, 'roctxThreadRangeA'),
  (4, 'hipLaunchKernel'), (5, 'hipMemcpyAsync'), (6, 'MEMORY_COPY_HOST_TO_DEVICE'),
  (7, 'KERNEL_DISPATCH'), (8, 'MEMORY_COPY'), (9, 'hipStreamSynchronize');
INSERT INTO rocpd_info_node_0001 (id, hash, machine_id, hostname) VALUES (1, 77, 'm1', 'node1');
INSERT INTO rocpd_info_process_0001 (id, nid, ppid, pid, command, environment) VALUES
  (1, 1, 1, 5151, 'python train.py', '{"RANK":"3","WORLD_SIZE":"8","HOME":"/root"}');
INSERT INTO rocpd_info_thread_0001 (id, nid, ppid, pid, tid, name) VALUES
  (1, 1, 1, 1, 5151, 'python'), (2, 1, 1, 1, 5152, 'pt_autograd_0');
INSERT INTO rocpd_info_agent_0001 (id, nid, pid, type, absolute_index, logical_index, type_index, name, product_name) VALUES
  (1, 1, 1, 'CPU', 0, 0, 0, 'AMD EPYC 9654', 'AMD EPYC 9654 96-Core Processor'),
  (2, 1, 1, 'GPU', 1, 1, 0, 'gfx942', 'AMD Instinct MI300X'),
  (3, 1, 1, 'GPU', 2, 2, 1, 'gfx942', 'AMD Instinct MI300X');
INSERT INTO rocpd_info_queue_0001 (id, nid, pid, name) VALUES (1, 1, 1, 'queue 1'), (2, 1, 1, 'queue 2');
INSERT INTO rocpd_info_stream_0001 (id, nid, pid, name) VALUES (1, 1, 1, 'stream 1'), (2, 1, 1, 'stream 2'), (3, 1, 1, 'stream 3');
INSERT INTO rocpd_info_kernel_symbol_0001 (id, nid, pid, code_object_id, kernel_name, display_name) VALUES
  (1, 1, 1, 1, '_Z4gemmIfLi128EEvPfPKfi.kd', 'void gemm<float, 128>(float*, float const*, int)'),
  (2, 1, 1, 1, 'ncclDevKernel_AllGather_RING_LL', NULL);
-- Correlation ids: 10-11 the two roctx ranges, 20-23 HIP calls (23 issues nothing).
INSERT INTO rocpd_event_0001 (id, category_id, correlation_id, extdata) VALUES
  (1, 1, 10, '{"message":"step 1"}'), (2, 1, 11, '{"message":"step 2"}'),
  (3, 2, 20, '{}'), (4, 2, 21, '{}'), (5, 2, 22, '{}'), (6, 2, 23, '{}'),
  (7, 7, 20, '{}'), (8, 7, 21, '{}'), (9, 8, 22, '{}');
INSERT INTO rocpd_region_0001 (id, nid, pid, tid, start, end, name_id, event_id) VALUES
  (1, 1, 1, 1, 5000000000, 5000100000, 3, 1),
  (2, 1, 1, 1, 5000100000, 5000250000, 3, 2),
  (3, 1, 1, 1, 5000001000, 5000001500, 4, 3),
  (4, 1, 1, 2, 5000002000, 5000002600, 4, 4),
  (5, 1, 1, 1, 5000003000, 5000003300, 5, 5),
  (6, 1, 1, 1, 5000004000, 5000090000, 9, 6);
INSERT INTO rocpd_kernel_dispatch_0001 (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end, workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, event_id) VALUES
  (1, 1, 1, 1, 2, 1, 1, 1, 1, 5000010000, 5000060000, 256, 1, 1, 65536, 1, 1, 7),
  (2, 1, 1, 2, 3, 2, 2, 2, 2, 5000020000, 5000080500, 256, 1, 1, 1024, 1, 1, 8);
INSERT INTO rocpd_memory_copy_0001 (id, nid, pid, tid, start, end, name_id, dst_agent_id, src_agent_id, size, queue_id, stream_id, event_id) VALUES
  (1, 1, 1, 1, 5000005000, 5000007500, 6, 2, 1, 1048576, NULL, 3, 9);
