package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nvdp-project/nvdp/audit"
	"github.com/nvdp-project/nvdp/privacy"
)

// k8sDir is the manifests' directory, from this package's.
const k8sDir = "../../deploy/k8s"

// readManifest decodes a manifest of deploy/k8s strictly (an unknown or
// misspelt field, or a value of the wrong type, is an error) into the
// Kubernetes API type out.
func readManifest(t *testing.T, name string, out any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(k8sDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// k8sExpand is Kubernetes' expansion of $(VAR) in a container's command
// and args from its environment: a defined variable is replaced, an
// undefined reference is left as it is, $$ is a literal $.
func k8sExpand(s string, env map[string]string) string {
	re := regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	return re.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// TestNvdpHelper is the nvdp binary of TestK8sManifests' pods: with
// NVDP_CLI_HELPER=1 it runs the command line after "--" and exits with its
// status, as main does.
func TestNvdpHelper(t *testing.T) {
	if os.Getenv("NVDP_CLI_HELPER") != "1" {
		t.Skip("helper process of TestK8sManifests")
	}
	rootCmd.SetArgs(flag.Args())
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nvdp:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestK8sManifests checks deploy/k8s against the Kubernetes API types and
// then runs what the manifests say, as the cluster would, on a local
// directory standing for the volume: every index of the Indexed Job as its
// own nvdp process (the image's entrypoint, the container's environment,
// JOB_COMPLETION_INDEX, the args expanded), then the merge Job's shell
// command; the merged report must be the one-process audit of the file.
func TestK8sManifests(t *testing.T) {
	var shards, merge batchv1.Job
	var pvc corev1.PersistentVolumeClaim
	readManifest(t, "audit-shards.yaml", &shards)
	readManifest(t, "audit-merge.yaml", &merge)
	readManifest(t, "pvc.yaml", &pvc)

	// The Indexed Job's contract.
	spec := shards.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("shards: completionMode %v, want Indexed", spec.CompletionMode)
	}
	if len(spec.Template.Spec.Containers) != 1 || len(merge.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("want one container in each Job")
	}
	shard, merger := spec.Template.Spec.Containers[0], merge.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range shard.Env {
		env[e.Name] = e.Value
	}
	n, err := strconv.Atoi(env["SHARDS"])
	completions, parallelism := -1, -1
	if spec.Completions != nil && spec.Parallelism != nil {
		completions, parallelism = int(*spec.Completions), int(*spec.Parallelism)
	}
	if err != nil || completions != n || parallelism != n {
		t.Fatalf("shards: SHARDS %q, completions %d, parallelism %d (-1: unset): want one number", env["SHARDS"], completions, parallelism)
	}
	if spec.BackoffLimitPerIndex != nil && spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("shards: backoffLimitPerIndex needs restartPolicy Never, not %q", spec.Template.Spec.RestartPolicy)
	}
	if !slices.Contains(shard.Args, "--shard=$(JOB_COMPLETION_INDEX)/$(SHARDS)") {
		t.Errorf("shards: args %q do not map JOB_COMPLETION_INDEX to --shard", shard.Args)
	}
	if len(shard.Command) != 0 || merger.Image != shard.Image {
		t.Errorf("shards: command %q (want the image's entrypoint), images %q and %q", shard.Command, shard.Image, merger.Image)
	}
	// One volume, the claim of pvc.yaml, mounted at the same place in both Jobs.
	mount := ""
	for _, job := range []batchv1.Job{shards, merge} {
		pod := job.Spec.Template.Spec
		if len(pod.Volumes) != 1 || pod.Volumes[0].PersistentVolumeClaim == nil || pod.Volumes[0].PersistentVolumeClaim.ClaimName != pvc.Name {
			t.Fatalf("%s: volumes %+v, want the claim %q", job.Name, pod.Volumes, pvc.Name)
		}
		m := pod.Containers[0].VolumeMounts
		if len(m) != 1 || m[0].Name != pod.Volumes[0].Name || (mount != "" && m[0].MountPath != mount) {
			t.Fatalf("%s: mounts %+v", job.Name, m)
		}
		mount = m[0].MountPath
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("pvc: access modes %v: every shard pod mounts it, want ReadWriteMany", pvc.Spec.AccessModes)
	}
	dockerfile, err := os.ReadFile(filepath.Join(k8sDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "\nENTRYPOINT [\"nvdp\"]") || !strings.Contains(string(dockerfile), "/usr/local/bin/nvdp") {
		t.Fatal("Dockerfile: want nvdp in /usr/local/bin and ENTRYPOINT [\"nvdp\"], which the shards' args follow")
	}

	// The volume, as the README prepares it: the posterior file and parts/.
	vol := t.TempDir()
	p := k8sPosteriors(19)
	if err := privacy.WritePosteriors(filepath.Join(vol, "posteriors.safetensors"), p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(vol, "parts"), 0o755); err != nil {
		t.Fatal(err)
	}
	onVolume := func(s string) string { return strings.ReplaceAll(s, mount, vol) }
	bin, path := nvdpOnPath(t)
	run := func(c *exec.Cmd, podEnv map[string]string) {
		t.Helper()
		c.Env = append(os.Environ(), "PATH="+path)
		for k, v := range podEnv {
			c.Env = append(c.Env, k+"="+v)
		}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%q: %v\n%s", c.Args, err, out)
		}
	}
	for i := range n {
		podEnv := map[string]string{"JOB_COMPLETION_INDEX": strconv.Itoa(i)}
		for k, v := range env {
			podEnv[k] = v
		}
		var args []string
		for _, a := range shard.Args {
			args = append(args, onVolume(k8sExpand(a, podEnv)))
		}
		// The image's ENTRYPOINT ["nvdp"], found on the pod's PATH.
		run(exec.Command(filepath.Join(bin, "nvdp"), args...), podEnv)
	}
	parts, _ := filepath.Glob(filepath.Join(vol, "parts", "*.json"))
	if len(parts) != n {
		t.Fatalf("%d parts after %d shards: %q", len(parts), n, parts)
	}
	var cmd []string
	for _, a := range append(slices.Clone(merger.Command), merger.Args...) {
		cmd = append(cmd, onVolume(a))
	}
	run(exec.Command(cmd[0], cmd[1:]...), nil)

	// The merged report against the one-process audit of the file.
	data, err := os.ReadFile(filepath.Join(vol, "audit.json"))
	if err != nil {
		t.Fatalf("the merge Job left no audit.json: %v", err)
	}
	var got audit.Report
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want, err := audit.Audit(t.Context(), p, audit.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got.Shards != n || got.Pairs != want.Pairs || got.Pairs != int64(p.M*(p.M-1)) || got.RDMax != want.RDMax ||
		!slices.Equal(got.Argmax, want.Argmax) || got.InvalidPairs != want.InvalidPairs {
		t.Errorf("merged: %d shards, %d pairs, rd_max %v at %v, %d invalid; one process: %d pairs, rd_max %v at %v, %d invalid",
			got.Shards, got.Pairs, got.RDMax, got.Argmax, got.InvalidPairs, want.Pairs, want.RDMax, want.Argmax, want.InvalidPairs)
	}
	if math.Abs(float64(*got.RDMean-*want.RDMean)) > 1e-12*math.Abs(float64(*want.RDMean)) {
		t.Errorf("merged rd_mean %v, one process %v", *got.RDMean, *want.RDMean)
	}
}

// nvdpOnPath writes an nvdp command that is this test binary as
// TestNvdpHelper (the image's nvdp) into a new directory, and returns the
// directory and a PATH with it first.
func nvdpOnPath(t *testing.T) (bin, path string) {
	t.Helper()
	bin = t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nNVDP_CLI_HELPER=1 exec %q -test.run='^TestNvdpHelper$' -- \"$@\"\n", os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "nvdp"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, bin + string(os.PathListSeparator) + os.Getenv("PATH")
}

// k8sPosteriors is a posterior file of m examples, N = 3, P = 8, every
// pair defined.
func k8sPosteriors(m int) *privacy.Posteriors {
	p := privacy.NewPosteriors(m, 3, 8)
	for x := range p.M {
		p.Alpha[x*p.N] = 1
		for i := 1; i < p.N; i++ {
			p.Alpha[x*p.N+i] = float32(0.4 + 0.05*float64((3*x+i)%11))
			for j := range p.P {
				k := (x*p.N+i)*p.P + j
				p.Mu[k] = float32(0.3 * float64((x*7+i*3+j)%5-2))
				p.Logvar[k] = float32(2 * math.Log(0.5+0.08*float64((x+2*j)%6)))
			}
		}
	}
	p.Metadata = map[string]string{"split": "dev", "task": "sst2"}
	return p
}
