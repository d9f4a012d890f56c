BEGIN TRANSACTION;
CREATE TABLE acknowledgements (
	id INTEGER NOT NULL, 
	benchmark_key VARCHAR(1024) NOT NULL, 
	commit_sha VARCHAR(64) NOT NULL, 
	who VARCHAR(255) NOT NULL, 
	why TEXT NOT NULL, 
	"when" DATETIME NOT NULL, 
	CONSTRAINT pk_acknowledgements PRIMARY KEY (id)
);
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES('0002');
CREATE TABLE benchmarks (
	id INTEGER NOT NULL, 
	"key" VARCHAR(1024) NOT NULL, 
	name VARCHAR(512) NOT NULL, 
	params TEXT NOT NULL, 
	unit VARCHAR(64) NOT NULL, 
	direction VARCHAR(16) NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	CONSTRAINT pk_benchmarks PRIMARY KEY (id), 
	CONSTRAINT uq_benchmarks_key UNIQUE ("key")
);
INSERT INTO "benchmarks" VALUES(1,'bench_attention.GPUTime.time_gpu(dtype=bf16, batch=1)','bench_attention.GPUTime.time_gpu','[["dtype", "bf16"], ["batch", "1"]]','seconds','lower','latency');
INSERT INTO "benchmarks" VALUES(2,'bench_attention.GPUTime.time_gpu(dtype=bf16, batch=8)','bench_attention.GPUTime.time_gpu','[["dtype", "bf16"], ["batch", "8"]]','seconds','lower','latency');
INSERT INTO "benchmarks" VALUES(3,'bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)','bench_attention.GPUTime.time_gpu','[["dtype", "fp16"], ["batch", "1"]]','seconds','lower','latency');
INSERT INTO "benchmarks" VALUES(4,'bench_attention.GPUTime.time_gpu(dtype=fp16, batch=8)','bench_attention.GPUTime.time_gpu','[["dtype", "fp16"], ["batch", "8"]]','seconds','lower','latency');
INSERT INTO "benchmarks" VALUES(5,'bench_correctness.Logits.track_max_abs_diff(backend=padded_sdpa)','bench_correctness.Logits.track_max_abs_diff','[["backend", "padded_sdpa"]]','max abs diff','lower','correctness');
INSERT INTO "benchmarks" VALUES(6,'bench_correctness.Logits.track_max_abs_diff(backend=triton)','bench_correctness.Logits.track_max_abs_diff','[["backend", "triton"]]','max abs diff','lower','correctness');
INSERT INTO "benchmarks" VALUES(7,'bench_model.Throughput.track_images_per_s','bench_model.Throughput.track_images_per_s','[]','images/s','higher','throughput');
CREATE TABLE commits (
	id INTEGER NOT NULL, 
	sha VARCHAR(64) NOT NULL, 
	parents TEXT NOT NULL, 
	branch VARCHAR(255) NOT NULL, 
	time DATETIME, 
	subject TEXT NOT NULL, 
	CONSTRAINT pk_commits PRIMARY KEY (id), 
	CONSTRAINT uq_commits_sha UNIQUE (sha)
);
INSERT INTO "commits" VALUES(1,'00000000abababababababababababababababab','[]','','2023-11-14 22:13:20.000000','');
INSERT INTO "commits" VALUES(2,'00000001abababababababababababababababab','[]','','2023-11-14 23:13:20.000000','');
INSERT INTO "commits" VALUES(3,'00000002abababababababababababababababab','[]','','2023-11-15 00:13:20.000000','');
CREATE TABLE machines (
	id INTEGER NOT NULL, 
	name VARCHAR(255) NOT NULL, 
	gpu VARCHAR(255) NOT NULL, 
	driver VARCHAR(64) NOT NULL, 
	cuda VARCHAR(64) NOT NULL, 
	torch VARCHAR(64) NOT NULL, 
	triton VARCHAR(64) NOT NULL, 
	cpu VARCHAR(255) NOT NULL, 
	extra TEXT NOT NULL, 
	CONSTRAINT pk_machines PRIMARY KEY (id), 
	CONSTRAINT uq_machines_name UNIQUE (name)
);
INSERT INTO "machines" VALUES(1,'h200-runner','','','','','','Xeon 8480','{"arch": "x86_64", "num_cpu": "16", "os": "Linux 6.8", "ram": "128G"}');
CREATE TABLE results (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	benchmark_id INTEGER NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	value FLOAT, 
	samples TEXT NOT NULL, 
	has_raw_samples BOOLEAN NOT NULL, 
	ci_99_a FLOAT, 
	ci_99_b FLOAT, 
	q_25 FLOAT, 
	q_75 FLOAT, 
	number FLOAT, 
	repeat FLOAT, 
	benchmark_version VARCHAR(128), 
	started_at DATETIME, 
	duration FLOAT, 
	CONSTRAINT pk_results PRIMARY KEY (id), 
	CONSTRAINT fk_results_benchmark_id_benchmarks FOREIGN KEY(benchmark_id) REFERENCES benchmarks (id), 
	CONSTRAINT fk_results_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id) ON DELETE CASCADE, 
	CONSTRAINT uq_results_run_id_benchmark_id UNIQUE (run_id, benchmark_id)
);
INSERT INTO "results" VALUES(1,1,3,'ok',1.02500000000000011349e-04,'[0.0001,0.000101,0.00010200000000000001,0.00010300000000000001,0.00010400000000000001,0.000105]',1,9.9656e-05,0.00010534,0.00010125,0.00010375,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(2,1,4,'ok',2.05000000000000022698e-04,'[0.0002,0.000202,0.00020400000000000003,0.00020600000000000002,0.00020800000000000001,0.00021]',1,0.00019931,0.00021069,0.0002025,0.0002075,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(3,1,1,'ok',3.075000000000000476e-04,'[0.00030000000000000003,0.00030300000000000005,0.000306,0.00030900000000000003,0.00031200000000000005,0.00031500000000000007]',1,0.00029897,0.00031603,0.00030375,0.00031125,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(4,1,2,'ok',4.10000000000000045397e-04,'[0.0004,0.000404,0.00040800000000000005,0.00041200000000000004,0.00041600000000000003,0.00042]',1,0.00039862,0.00042138,0.000405,0.000415,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(5,1,7,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-model-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(6,1,6,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(7,1,5,'ok',103.525,'[101.0,102.01,103.02,104.03,105.04,106.05000000000001]',1,100.65,106.4,102.26,104.79,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(8,2,3,'ok',1.02500000000000011349e-04,'[0.0001,0.000101,0.00010200000000000001,0.00010300000000000001,0.00010400000000000001,0.000105]',1,9.9656e-05,0.00010534,0.00010125,0.00010375,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(9,2,4,'ok',2.05000000000000022698e-04,'[0.0002,0.000202,0.00020400000000000003,0.00020600000000000002,0.00020800000000000001,0.00021]',1,0.00019931,0.00021069,0.0002025,0.0002075,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(10,2,1,'ok',3.075000000000000476e-04,'[0.00030000000000000003,0.00030300000000000005,0.000306,0.00030900000000000003,0.00031200000000000005,0.00031500000000000007]',1,0.00029897,0.00031603,0.00030375,0.00031125,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(11,2,2,'ok',4.10000000000000045397e-04,'[0.0004,0.000404,0.00040800000000000005,0.00041200000000000004,0.00041600000000000003,0.00042]',1,0.00039862,0.00042138,0.000405,0.000415,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(12,2,7,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-model-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(13,2,6,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(14,2,5,'ok',103.525,'[101.0,102.01,103.02,104.03,105.04,106.05000000000001]',1,100.65,106.4,102.26,104.79,1.0,6.0,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(15,3,3,'ok',1.02500000000000011349e-04,'[0.0001,0.000101,0.00010200000000000001,0.00010300000000000001,0.00010400000000000001,0.000105]',1,9.9656e-05,0.00010534,0.00010125,0.00010375,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(16,3,4,'ok',2.05000000000000022698e-04,'[0.0002,0.000202,0.00020400000000000003,0.00020600000000000002,0.00020800000000000001,0.00021]',1,0.00019931,0.00021069,0.0002025,0.0002075,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(17,3,1,'ok',3.075000000000000476e-04,'[0.00030000000000000003,0.00030300000000000005,0.000306,0.00030900000000000003,0.00031200000000000005,0.00031500000000000007]',1,0.00029897,0.00031603,0.00030375,0.00031125,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(18,3,2,'ok',4.10000000000000045397e-04,'[0.0004,0.000404,0.00040800000000000005,0.00041200000000000004,0.00041600000000000003,0.00042]',1,0.00039862,0.00042138,0.000405,0.000415,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(19,3,7,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-model-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(20,3,6,'ok',102.5,'[100.0,101.0,102.0,103.0,104.0,105.0]',1,99.656,105.34,101.25,103.75,1.0,6.0,'v-corr-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(21,3,5,'ok',103.525,'[101.0,102.01,103.02,104.03,105.04,106.05000000000001]',1,100.65,106.4,102.26,104.79,1.0,6.0,'v-corr-1','2026-11-01 02:00:00.000000',1.5);
CREATE TABLE runs (
	id INTEGER NOT NULL, 
	run_key VARCHAR(1024) NOT NULL, 
	digest VARCHAR(64) NOT NULL, 
	machine_id INTEGER NOT NULL, 
	commit_id INTEGER NOT NULL, 
	env_name VARCHAR(255) NOT NULL, 
	started_at DATETIME, 
	ingested_at DATETIME NOT NULL, 
	source TEXT NOT NULL, 
	environment TEXT NOT NULL, 
	CONSTRAINT pk_runs PRIMARY KEY (id), 
	CONSTRAINT fk_runs_commit_id_commits FOREIGN KEY(commit_id) REFERENCES commits (id), 
	CONSTRAINT fk_runs_machine_id_machines FOREIGN KEY(machine_id) REFERENCES machines (id), 
	CONSTRAINT uq_runs_run_key UNIQUE (run_key)
);
INSERT INTO "runs" VALUES(1,'h200-runner/00000000abababababababababababababababab/existing-py_usr_bin_python3.11','802fa663792da7e30012ef533e337b60756d3bbca6d380478188567ca51faa54',1,1,'existing-py_usr_bin_python3.11','2026-11-01 00:00:00.000000','2026-12-01 21:25:46.660580','/tmp/history-fixtures-yig47o92/r2/h200-runner/00000000-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(2,'h200-runner/00000001abababababababababababababababab/existing-py_usr_bin_python3.11','8eba8cdc25e7e4824c136866fee94362c92727d0dd659884e4f84a24b0d68ef1',1,2,'existing-py_usr_bin_python3.11','2026-11-01 01:00:00.000000','2026-12-01 21:25:46.670553','/tmp/history-fixtures-yig47o92/r2/h200-runner/00000001-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(3,'h200-runner/00000002abababababababababababababababab/existing-py_usr_bin_python3.11','2feae39df3c835fe5abedaa9c413a9ce46c4c174dd9517143cf024c3f3ce34b8',1,3,'existing-py_usr_bin_python3.11','2026-11-01 02:00:00.000000','2026-12-01 21:25:46.672718','/tmp/history-fixtures-yig47o92/r2/h200-runner/00000002-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
CREATE TABLE verdicts (
	id INTEGER NOT NULL, 
	benchmark_id INTEGER NOT NULL, 
	outcome VARCHAR(16) NOT NULL, 
	base_value FLOAT, 
	head_value FLOAT, 
	ratio FLOAT, 
	ci_low FLOAT, 
	ci_high FLOAT, 
	p_value FLOAT, 
	threshold FLOAT, 
	base_sha VARCHAR(64) NOT NULL, 
	head_sha VARCHAR(64) NOT NULL, 
	reason TEXT NOT NULL, 
	created_at DATETIME NOT NULL, 
	CONSTRAINT pk_verdicts PRIMARY KEY (id), 
	CONSTRAINT fk_verdicts_benchmark_id_benchmarks FOREIGN KEY(benchmark_id) REFERENCES benchmarks (id), 
	CONSTRAINT uq_verdicts_benchmark_id_base_sha_head_sha UNIQUE (benchmark_id, base_sha, head_sha)
);
INSERT INTO "verdicts" VALUES(1,1,'regressed',1.0,1.3,1.3,NULL,NULL,NULL,NULL,'00000000abababababababababababababababab','00000001abababababababababababababababab','slower','2026-11-29 00:00:00+00:00');
CREATE INDEX ix_commits_branch ON commits (branch);
CREATE INDEX ix_benchmarks_name ON benchmarks (name);
CREATE INDEX ix_runs_commit_id ON runs (commit_id);
CREATE INDEX ix_runs_machine_id ON runs (machine_id);
CREATE INDEX ix_results_benchmark_id_run_id ON results (benchmark_id, run_id);
CREATE INDEX ix_verdicts_benchmark_id ON verdicts (benchmark_id);
CREATE INDEX ix_verdicts_head_sha ON verdicts (head_sha);
CREATE INDEX ix_acknowledgements_benchmark_key ON acknowledgements (benchmark_key);
CREATE INDEX ix_acknowledgements_commit_sha ON acknowledgements (commit_sha);
COMMIT;
