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
INSERT INTO "acknowledgements" VALUES(1,'bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)','00000003abababababababababababababababab','ada','expected: new tiling','2026-11-30 12:00:00.123456');
CREATE TABLE alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "alembic_version" VALUES('0003');
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
INSERT INTO "commits" VALUES(1,'00000000abababababababababababababababab','[]','main','2026-11-01 00:00:00.000000','commit 0');
INSERT INTO "commits" VALUES(2,'00000001abababababababababababababababab','["00000000abababababababababababababababab"]','main','2026-11-01 01:00:00.000000','commit 1');
INSERT INTO "commits" VALUES(3,'00000002abababababababababababababababab','["00000001abababababababababababababababab"]','main','2026-11-01 02:00:00.000000','commit 2');
INSERT INTO "commits" VALUES(4,'00000003abababababababababababababababab','["00000002abababababababababababababababab"]','main','2026-11-01 03:00:00.000000','commit 3');
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
INSERT INTO "machines" VALUES(2,'a100-runner','NVIDIA A100-SXM4-80GB','550.54','12.4','','','Xeon 8480','{"arch": "x86_64", "num_cpu": "16", "os": "Linux 6.8", "ram": "128G"}');
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
INSERT INTO "results" VALUES(8,2,3,'ok',1.03949999999999978831e-04,'[0.0001007,0.00010199999999999999,0.00010329999999999999,0.00010459999999999998,0.0001059,0.00010719999999999999]',1,0.00010025,0.00010765,0.00010232,0.00010557,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(9,2,4,'ok',2.07899999999999957663e-04,'[0.0002014,0.00020399999999999997,0.00020659999999999998,0.00020919999999999996,0.0002118,0.00021439999999999998]',1,0.0002005,0.0002153,0.00020465,0.00021115,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(10,2,1,'ok',0.00031185,'[0.00030209999999999997,0.00030599999999999996,0.0003099,0.0003138,0.0003177,0.00032159999999999996]',1,0.00030076,0.00032294,0.00030697,0.00031673,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(11,2,2,'ok',4.74999999999999958366e-05,'[5e-324,1e-300,2.5e-05,0.30000000000000004,0.3333333333333333,7e-05]',1,-0.12598,0.33712,6.25e-06,0.22502,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(12,2,7,'ok',101.5,'[101,102,102,99,1e+300,100]',1,-2.3371e+299,1.0e+300,100.25,102.0,1.0,6.0,'v-model-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(13,2,6,'ok',1.03949999999999978831e-04,'[0.0001007,0.00010199999999999999,0.00010329999999999999,0.00010459999999999998,0.0001059,0.00010719999999999999]',1,0.00010025,0.00010765,0.00010232,0.00010557,1.0,6.0,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(14,2,5,'skipped',NULL,'[]',0,NULL,NULL,NULL,NULL,NULL,NULL,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(15,3,3,'ok',0.00010465,'[0.00010140000000000001,0.0001027,0.00010400000000000001,0.0001053,0.00010660000000000002,0.00010790000000000001]',1,0.00010095,0.00010835,0.00010302,0.00010628,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(16,3,4,'ok',0.0002093,'[0.00020280000000000002,0.0002054,0.00020800000000000001,0.0002106,0.00021320000000000003,0.00021580000000000001]',1,0.0002019,0.0002167,0.00020605,0.00021255,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(17,3,1,'ok',0.00031395,'[0.0003042,0.0003081,0.00031200000000000005,0.00031590000000000003,0.0003198,0.0003237]',1,0.00030286,0.00032504,0.00030908,0.00031883,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(18,3,2,'ok',4.74999999999999958366e-05,'[5e-324,1e-300,2.5e-05,0.30000000000000004,0.3333333333333333,7e-05]',1,-0.12598,0.33712,6.25e-06,0.22502,1.0,6.0,'v-attn-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(19,3,7,'failed',NULL,'[]',0,NULL,NULL,NULL,NULL,NULL,NULL,'v-model-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(20,3,6,'ok',0.00010465,'[0.00010140000000000001,0.0001027,0.00010400000000000001,0.0001053,0.00010660000000000002,0.00010790000000000001]',1,0.00010095,0.00010835,0.00010302,0.00010628,1.0,6.0,'v-corr-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(21,3,5,'ok',0.0002093,'[0.00020280000000000002,0.0002054,0.00020800000000000001,0.0002106,0.00021320000000000003,0.00021580000000000001]',1,0.0002019,0.0002167,0.00020605,0.00021255,1.0,6.0,'v-corr-1','2026-11-01 02:00:00.000000',1.5);
INSERT INTO "results" VALUES(22,4,3,'ok',1.05349999999999985756e-04,'[0.0001021,0.00010339999999999998,0.0001047,0.00010599999999999999,0.0001073,0.0001086]',1,0.00010165,0.00010905,0.00010372,0.00010697,1.0,6.0,'v-attn-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(23,4,4,'ok',2.10699999999999971513e-04,'[0.0002042,0.00020679999999999996,0.0002094,0.00021199999999999998,0.0002146,0.0002172]',1,0.0002033,0.0002181,0.00020745,0.00021395,1.0,6.0,'v-attn-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(24,4,1,'ok',0.00031605,'[0.0003063,0.00031019999999999995,0.0003141,0.000318,0.0003219,0.0003258]',1,0.00030496,0.00032714,0.00031117,0.00032093,1.0,6.0,'v-attn-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(25,4,2,'ok',4.74999999999999958366e-05,'[5e-324,1e-300,2.5e-05,0.30000000000000004,0.3333333333333333,7e-05]',1,-0.12598,0.33712,6.25e-06,0.22502,1.0,6.0,'v-attn-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(26,4,7,'ok',102.5,'[103,104,102,99,1e+300,100]',1,-2.3371e+299,1.0e+300,100.5,103.75,1.0,6.0,'v-model-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(27,4,6,'ok',1.05349999999999985756e-04,'[0.0001021,0.00010339999999999998,0.0001047,0.00010599999999999999,0.0001073,0.0001086]',1,0.00010165,0.00010905,0.00010372,0.00010697,1.0,6.0,'v-corr-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(28,4,5,'ok',2.10699999999999971513e-04,'[0.0002042,0.00020679999999999996,0.0002094,0.00021199999999999998,0.0002146,0.0002172]',1,0.0002033,0.0002181,0.00020745,0.00021395,1.0,6.0,'v-corr-1','2026-11-01 03:00:00.000000',1.5);
INSERT INTO "results" VALUES(29,5,3,'ok',1.02500000000000011349e-04,'[0.00010250000000000001]',0,9.9656e-05,0.00010534,0.00010125,0.00010375,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(30,5,4,'ok',2.05000000000000022698e-04,'[0.00020500000000000002]',0,0.00019931,0.00021069,0.0002025,0.0002075,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(31,5,1,'ok',3.075000000000000476e-04,'[0.00030750000000000005]',0,0.00029897,0.00031603,0.00030375,0.00031125,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(32,5,2,'ok',4.10000000000000045397e-04,'[0.00041000000000000005]',0,0.00039862,0.00042138,0.000405,0.000415,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(33,5,7,'ok',102.5,'[102.5]',0,99.656,105.34,101.25,103.75,1.0,6.0,'v-model-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(34,5,6,'ok',102.5,'[102.5]',0,99.656,105.34,101.25,103.75,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(35,5,5,'ok',103.525,'[103.525]',0,100.65,106.4,102.26,104.79,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(36,6,3,'ok',1.02500000000000011349e-04,'[0.00010250000000000001]',0,9.9656e-05,0.00010534,0.00010125,0.00010375,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(37,6,4,'ok',2.05000000000000022698e-04,'[0.00020500000000000002]',0,0.00019931,0.00021069,0.0002025,0.0002075,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(38,6,1,'ok',3.075000000000000476e-04,'[0.00030750000000000005]',0,0.00029897,0.00031603,0.00030375,0.00031125,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(39,6,2,'ok',4.10000000000000045397e-04,'[0.00041000000000000005]',0,0.00039862,0.00042138,0.000405,0.000415,1.0,6.0,'v-attn-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(40,6,7,'ok',102.5,'[102.5]',0,99.656,105.34,101.25,103.75,1.0,6.0,'v-model-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(41,6,6,'ok',102.5,'[102.5]',0,99.656,105.34,101.25,103.75,1.0,6.0,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(42,6,5,'ok',103.525,'[103.525]',0,100.65,106.4,102.26,104.79,1.0,6.0,'v-corr-1','2026-11-01 01:00:00.000000',1.5);
INSERT INTO "results" VALUES(43,1,3,'ok',0.00010325,'[0.0001,0.0001013,0.00010260000000000001,0.00010389999999999999,0.00010520000000000001,0.0001065,0.0001]',1,9.9552e-05,0.00010695,0.00010162,0.00010488,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(44,1,4,'ok',0.0002065,'[0.0002,0.0002026,0.00020520000000000003,0.00020779999999999998,0.00021040000000000002,0.000213,0.0002]',1,0.0001991,0.0002139,0.00020325,0.00020975,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(45,1,1,'ok',0.00030975,'[0.00030000000000000003,0.0003039,0.00030780000000000005,0.0003117,0.00031560000000000003,0.0003195,0.00030000000000000003]',1,0.00029866,0.00032084,0.00030488,0.00031463,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(46,1,2,'ok',4.74999999999999958366e-05,'[5e-324,1e-300,2.5e-05,0.30000000000000004,0.3333333333333333,7e-05,5e-324]',1,-0.12598,0.33712,6.25e-06,0.22502,1.0,6.0,'v-attn-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(47,1,7,'ok',100.5,'[100,101,102,99,1e+300,100]',1,-2.3371e+299,1.0e+300,100.0,101.75,1.0,6.0,'v-model-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(48,1,6,'ok',0.00010325,'[0.0001,0.0001013,0.00010260000000000001,0.00010389999999999999,0.00010520000000000001,0.0001065]',1,9.9552e-05,0.00010695,0.00010162,0.00010488,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
INSERT INTO "results" VALUES(49,1,5,'ok',0.0002065,'[0.0002,0.0002026,0.00020520000000000003,0.00020779999999999998,0.00021040000000000002,0.000213]',1,0.0001991,0.0002139,0.00020325,0.00020975,1.0,6.0,'v-corr-1','2026-11-01 00:00:00.000000',1.5);
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
INSERT INTO "runs" VALUES(1,'h200-runner/00000000abababababababababababababababab/existing-py_usr_bin_python3.11','460be9a45df75181e231c7f8d87fdfb9b8211a6e8ba917314cfc2ce1e222a779',1,1,'existing-py_usr_bin_python3.11','2026-11-01 00:00:00.000000','2026-12-01 21:25:47.025042','/tmp/history-fixtures-yig47o92/h200/h200-runner/00000000-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(2,'h200-runner/00000001abababababababababababababababab/existing-py_usr_bin_python3.11','78f630599a32c6b9f504026f0bc778e14df02b3f8ca89ce6537fcf6d29efa9f3',1,2,'existing-py_usr_bin_python3.11','2026-11-01 01:00:00.000000','2026-12-01 21:25:47.009495','/tmp/history-fixtures-yig47o92/h200/h200-runner/00000001-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(3,'h200-runner/00000002abababababababababababababababab/existing-py_usr_bin_python3.11','033f902e8f3d800de2807b9abe8ffa24558b60976959486fd1319e5f21d6cf3b',1,3,'existing-py_usr_bin_python3.11','2026-11-01 02:00:00.000000','2026-12-01 21:25:47.011389','/tmp/history-fixtures-yig47o92/h200/h200-runner/00000002-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(4,'h200-runner/00000003abababababababababababababababab/existing-py_usr_bin_python3.11','7d9d10ceedfff4e7f0aa449ce29ec268ae9c4cc96869ff05c952dad573bf4179',1,4,'existing-py_usr_bin_python3.11','2026-11-01 03:00:00.000000','2026-12-01 21:25:47.013178','/tmp/history-fixtures-yig47o92/h200/h200-runner/00000003-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(5,'a100-runner/00000001abababababababababababababababab/existing-py_usr_bin_python3.11','a2f4f3b6e087e77d455873b480ed878fe6173b978d73ad9263da9366bb634d18',2,2,'existing-py_usr_bin_python3.11','2026-11-01 00:00:00.000000','2026-12-01 21:25:47.016826','/tmp/history-fixtures-yig47o92/a100/a100-runner/00000001-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
INSERT INTO "runs" VALUES(6,'a100-runner/00000003abababababababababababababababab/existing-py_usr_bin_python3.11','1cc1d6b3d19d9b9fb1513cad7882cdcf878032c97279c4e1464a2cb445025119',2,4,'existing-py_usr_bin_python3.11','2026-11-01 01:00:00.000000','2026-12-01 21:25:47.022059','/tmp/history-fixtures-yig47o92/a100/a100-runner/00000003-existing-py_usr_bin_python3.11.json','{"env:CUDA_VISIBLE": "0", "env_name": "existing-py_usr_bin_python3.11", "python": "3.11", "req:torch": "2.14.1"}');
CREATE TABLE "verdicts" (
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
	machine VARCHAR(255) DEFAULT '' NOT NULL, 
	CONSTRAINT pk_verdicts PRIMARY KEY (id), 
	CONSTRAINT fk_verdicts_benchmark_id_benchmarks FOREIGN KEY(benchmark_id) REFERENCES benchmarks (id), 
	CONSTRAINT uq_verdicts_benchmark_id_machine_base_sha_head_sha UNIQUE (benchmark_id, machine, base_sha, head_sha)
);
INSERT INTO "verdicts" VALUES(1,3,'regressed',0.0001,0.00013,1.3,1.2,1.4,1.0e-06,0.025,'00000002abababababababababababababababab','00000003abababababababababababababababab','slower','2026-12-01 21:25:47.035202','h200-runner');
INSERT INTO "verdicts" VALUES(2,3,'inconclusive',0.0001,NULL,NULL,NULL,NULL,NULL,NULL,'00000001abababababababababababababababab','00000003abababababababababababababababab','missing','2026-12-01 21:25:47.035202','a100-runner');
CREATE INDEX ix_commits_branch ON commits (branch);
CREATE INDEX ix_benchmarks_name ON benchmarks (name);
CREATE INDEX ix_runs_commit_id ON runs (commit_id);
CREATE INDEX ix_runs_machine_id ON runs (machine_id);
CREATE INDEX ix_results_benchmark_id_run_id ON results (benchmark_id, run_id);
CREATE INDEX ix_acknowledgements_benchmark_key ON acknowledgements (benchmark_key);
CREATE INDEX ix_acknowledgements_commit_sha ON acknowledgements (commit_sha);
CREATE INDEX ix_verdicts_benchmark_id ON verdicts (benchmark_id);
CREATE INDEX ix_verdicts_head_sha ON verdicts (head_sha);
COMMIT;
