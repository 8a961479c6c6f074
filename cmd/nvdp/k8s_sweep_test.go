package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nvdp-project/nvdp/sweep"
	"github.com/nvdp-project/nvdp/train"
)

// sweepSpeedFlags make the manifests' sweep a test's: tiny trainings on the
// synthetic SST-2 (later flags win over the manifest's).
var sweepSpeedFlags = []string{"--epochs=1", "--max-seq-len=8", "--batch-size=16", "--audit-limit=4", "--no-progress"}

// TestK8sSweepStages checks deploy/k8s/sweep against the Kubernetes API
// types and what its Jobs must agree on (one volume at one path, one image,
// one --out; Indexed completions that are the plan's counts of each stage,
// JOB_COMPLETION_INDEX as --index), then runs them as the cluster would on a
// directory standing for the volume: the plan Job, each index of the grid
// Job as its own process, the select Job, each index of the main Job, the
// report Job's shell command. The sweep directory must then hold what the
// one-process `nvdp sweep` of the same flags makes: the same cells with
// the same statuses, C_mu and reuse, the same selection, the same reports.
func TestK8sSweepStages(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 8 tiny models")
	}
	var planJob, gridJob, selectJob, mainJob, reportJob batchv1.Job
	var pvc corev1.PersistentVolumeClaim
	readManifest(t, "sweep/plan.yaml", &planJob)
	readManifest(t, "sweep/grid.yaml", &gridJob)
	readManifest(t, "sweep/select.yaml", &selectJob)
	readManifest(t, "sweep/main.yaml", &mainJob)
	readManifest(t, "sweep/report.yaml", &reportJob)
	readManifest(t, "sweep/pvc.yaml", &pvc)
	jobs := []*batchv1.Job{&planJob, &gridJob, &selectJob, &mainJob, &reportJob}
	mount, image, out := "", "", ""
	for _, j := range jobs {
		pod := j.Spec.Template.Spec
		if len(pod.Containers) != 1 || len(pod.Volumes) != 1 || pod.Volumes[0].PersistentVolumeClaim == nil ||
			pod.Volumes[0].PersistentVolumeClaim.ClaimName != pvc.Name || pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Fatalf("%s: want one container, the claim %q, restartPolicy Never", j.Name, pvc.Name)
		}
		c := pod.Containers[0]
		if len(c.VolumeMounts) != 1 || (mount != "" && c.VolumeMounts[0].MountPath != mount) || (image != "" && c.Image != image) {
			t.Fatalf("%s: mounts %+v, image %q: want one mount at one path, one image", j.Name, c.VolumeMounts, c.Image)
		}
		mount, image = c.VolumeMounts[0].MountPath, c.Image
		if o := containerFlags(c.Args)["out"]; j != &reportJob && (o == "" || out != "" && o != out) {
			t.Fatalf("%s: --out %q, want one sweep directory", j.Name, o)
		} else if o != "" {
			out = o
		}
	}
	if !strings.Contains(strings.Join(reportJob.Spec.Template.Spec.Containers[0].Command, " "), "sweep finish --out "+out+" && nvdp report "+out) {
		t.Errorf("report: command %q", reportJob.Spec.Template.Spec.Containers[0].Command)
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("pvc: %v: every pod of every stage mounts it, want ReadWriteMany", pvc.Spec.AccessModes)
	}
	for _, tc := range []struct {
		job   *batchv1.Job
		stage string
	}{{&gridJob, sweep.StageGrid}, {&mainJob, sweep.StageMain}} {
		s, c := tc.job.Spec, tc.job.Spec.Template.Spec.Containers[0]
		f := containerFlags(c.Args)
		if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil || s.Parallelism == nil ||
			*s.Parallelism > *s.Completions || f["stage"] != tc.stage || f["index"] != "$(JOB_COMPLETION_INDEX)" || !slices.Equal(c.Args[:2], []string{"sweep", "stage"}) {
			t.Fatalf("%s: want an Indexed Job running `nvdp sweep stage --stage %s --index=$(JOB_COMPLETION_INDEX)`", tc.job.Name, tc.stage)
		}
	}

	// The volume: the data the plan's flags name, under a temporary directory.
	vol := t.TempDir()
	glueDir, vocab := synthSST2(t, 32)
	onVolume := func(s string) string { return strings.ReplaceAll(s, mount, vol) }
	planArgs := slices.Clone(planJob.Spec.Template.Spec.Containers[0].Args)
	pf := containerFlags(planArgs)
	if err := os.CopyFS(onVolume(pf["glue-dir"]), os.DirFS(glueDir)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(vocab)
	if err := os.WriteFile(onVolume(pf["vocab"]), b, 0o644); err != nil {
		t.Fatal(err)
	}
	extra := sweepSpeedFlags
	bin, path := nvdpOnPath(t)
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(filepath.Join(bin, "nvdp"), args...)
		c.Env = append(os.Environ(), "PATH="+path)
		o, err := c.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("nvdp %q: %v\n%s%s", args, err, o, stderr)
		}
		return string(o)
	}
	var args []string
	for _, a := range planArgs {
		args = append(args, onVolume(a))
	}
	var counts sweep.StagesSummary
	if err := json.Unmarshal([]byte(run(append(args, extra...)...)), &counts); err != nil {
		t.Fatal(err)
	}
	if len(counts.Stages) != 2 || counts.Stages[0].Cells != int(*gridJob.Spec.Completions) || counts.Stages[1].Cells != int(*mainJob.Spec.Completions) {
		t.Fatalf("the plan's stages %+v; the Jobs' completions: grid %d, main %d", counts.Stages, *gridJob.Spec.Completions, *mainJob.Spec.Completions)
	}
	// Each index as its own process, with the args Kubernetes expands.
	index := func(j *batchv1.Job, i int) {
		var a []string
		for _, x := range j.Spec.Template.Spec.Containers[0].Args {
			a = append(a, onVolume(k8sExpand(x, map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)})))
		}
		run(a...)
	}
	for i := range int(*gridJob.Spec.Completions) {
		index(&gridJob, i)
	}
	var sel []string
	for _, a := range selectJob.Spec.Template.Spec.Containers[0].Args {
		sel = append(sel, onVolume(a))
	}
	run(sel...)
	for i := range int(*mainJob.Spec.Completions) {
		index(&mainJob, i)
	}
	var cmd []string
	for _, a := range reportJob.Spec.Template.Spec.Containers[0].Command {
		cmd = append(cmd, onVolume(a))
	}
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Env = append(os.Environ(), "PATH="+path)
	if o, err := c.CombinedOutput(); err != nil || !strings.Contains(string(o), "sst2") {
		t.Fatalf("the report Job: %v\n%s", err, o)
	}

	// The one-process sweep of the same flags.
	one := filepath.Join(t.TempDir(), "one")
	var flags []string
	for _, a := range args[1:] {
		if a != "--plan" {
			flags = append(flags, strings.Replace(a, "--out="+onVolume(out), "--out="+one, 1))
		}
	}
	if o, err := runCmd(newSweepCmd(), append(flags, extra...)...); err != nil {
		t.Fatalf("nvdp sweep: %v\n%s", err, o)
	}
	staged := onVolume(out)
	want, got := readSweepManifest(t, one), readSweepManifest(t, staged)
	if len(got.Cells) != len(want.Cells) || len(got.Cells) != 6 {
		t.Fatalf("%d cells staged, %d in one process; want 6", len(got.Cells), len(want.Cells))
	}
	for i := range want.Cells {
		g, w := got.Cells[i], want.Cells[i]
		if g.ID != w.ID || g.Status != w.Status || g.Status != sweep.CellDone || g.CMu != w.CMu || g.ReusedFrom != w.ReusedFrom {
			t.Errorf("cell %d: staged %+v\n        one process %+v", i, g, w)
			continue
		}
		rg, err1 := train.ReadReport(g.Dir)
		rw, err2 := train.ReadReport(w.Dir)
		if err1 != nil || err2 != nil || fmt.Sprint(rg.Utility) != fmt.Sprint(rw.Utility) || (rg.Privacy == nil) != (rw.Privacy == nil) ||
			rg.Privacy != nil && rg.Privacy.RDMax != rw.Privacy.RDMax {
			t.Errorf("cell %s: staged report %v, one process %v (%v, %v)", g.ID, rg, rw, err1, err2)
		}
	}
	if got.Selections["sst2"] == nil || want.Selections["sst2"] == nil || got.Selections["sst2"].CMu != want.Selections["sst2"].CMu {
		t.Errorf("selection: staged %+v, one process %+v", got.Selections["sst2"], want.Selections["sst2"])
	}
	reused := 0
	for _, c := range got.Cells {
		if c.ReusedFrom != "" {
			reused++
		}
	}
	if reused != 1 {
		t.Errorf("%d staged cells reuse a grid run, want 1", reused)
	}
}

func readSweepManifest(t *testing.T, dir string) sweep.Manifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, sweep.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m sweep.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
