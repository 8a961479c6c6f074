// Package sweep runs the paper's grids of train + eval + audit runs
// (train.RunPipeline, `nvdp run`): tasks x variants x lambdas x seeds, with an
// optional C_mu grid selected per task (paper §3.2, "Mean clipping") and
// certified-epsilon targets as a dimension, in a directory layout that skips
// finished cells and resumes interrupted ones (docs/results.md, `nvdp sweep`).
//
// The files follow the jobs: cell.go (the cells, their directories and
// pipeline options), manifest.go (Out/sweep.json), run.go (the scheduler:
// skip, resume, reuse a grid run, check a finished cell), runner.go (how a
// cell runs: in this process or as a subprocess) and cmu.go (the C_mu
// selection).
//
// # Concurrency
//
// Cells of one process run one at a time; Options.Jobs > 1 needs a Runner
// that runs each cell in its own process (Subprocess), and Run rejects it
// with the in-process runner before any work. Two trainings in one process
// would share state the engine assumes it owns: nn.Parallel splits every
// kernel over GOMAXPROCS goroutines on the premise that the cores are free
// (it never runs beside a BLAS call of the same training), and under the
// openblas build tag nn's attention sets OpenBLAS's thread count, a
// process-wide setting, to 1 around its per-head GEMMs and restores it after
// (nn.serialBLAS). A second training would issue its GEMMs while the count
// changes under it (OpenBLAS resizes its thread pool; the setting is global
// and not meant to change during calls from other threads) and both would
// oversubscribe the cores with kernel goroutines and spinning BLAS threads.
// A subprocess has its own OpenBLAS and Go runtime; Subprocess gives each
// child OPENBLAS_NUM_THREADS and GOMAXPROCS = cores / Jobs (SubprocessEnv).
package sweep
