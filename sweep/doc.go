// Package sweep runs the paper's grids of train, evaluate and audit runs,
// each a [train.RunPipeline] as `nvdp run` does: tasks x variants x lambdas
// x seeds. A C_mu grid can be added and selected per task, as in paper
// §3.2, "Mean clipping", and certified-epsilon targets can be a dimension.
// The directory layout skips finished cells and resumes interrupted ones;
// see docs/results.md and `nvdp sweep`.
//
// The files follow the jobs: cell.go has the cells, their directories and
// pipeline options; manifest.go writes Out/sweep.json; run.go is the
// scheduler, which skips, resumes, reuses a grid run and checks a finished
// cell; runner.go says how a cell runs, in this process or as a subprocess;
// and cmu.go selects C_mu.
//
// # Concurrency
//
// Cells of one process run one at a time. Options.Jobs > 1 needs a [Runner]
// that runs each cell in its own process, such as [Subprocess]; with the
// in-process runner, [Run] rejects it before any work.
//
// Two trainings in one process would share state that the engine assumes it
// owns. nn.Parallel splits every kernel over GOMAXPROCS goroutines on the
// premise that the cores are free, and it never runs beside a BLAS call of
// the same training. Under the openblas build tag, nn's attention sets
// OpenBLAS's thread count, a process-wide setting, to 1 around its per-head
// GEMMs and restores it after, in nn.serialBLAS. A second training would
// issue its GEMMs while the count changes under it: OpenBLAS resizes its
// thread pool, and the setting is global and not meant to change during
// calls from other threads. Both trainings would also oversubscribe the cores
// with kernel goroutines and spinning BLAS threads.
//
// A subprocess has its own OpenBLAS and Go runtime. Subprocess gives each
// child OPENBLAS_NUM_THREADS and GOMAXPROCS = cores / Jobs; see
// subprocessEnv.
package sweep
