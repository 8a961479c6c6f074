package main

import (
	"encoding/json"
	nvledger "github.com/nvdp-project/nvdp/ledger"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/nvdp-project/nvdp/internal/pgtest"
)

// containerFlags parses a container's args of the form --name=value or
// --name into name -> value ("" for a switch).
func containerFlags(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			k, v, _ := strings.Cut(name, "=")
			out[k] = v
		}
	}
	return out
}

// secretEnv is the environment variable of c set from a Secret, with the
// Secret's name and key.
func secretEnv(c corev1.Container) (env, secret, key string) {
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.Name, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
		}
	}
	return "", "", ""
}

// TestK8sServeManifests checks deploy/k8s/serve against the Kubernetes API
// types (strictly: a misspelt field or a wrong type fails) and what the
// replicas and their objects must agree on, then runs what they say as the
// cluster would: the ledger-init Job's command on a throwaway PostgreSQL
// (its URL in the variable the Secret sets), then two replicas with the
// Deployment's command line (the address on loopback and the fake model
// standing for the volume), which pass /readyz and /healthz and charge one
// ledger.
func TestK8sServeManifests(t *testing.T) {
	var (
		dep    appsv1.Deployment
		svc    corev1.Service
		pdb    policyv1.PodDisruptionBudget
		job    batchv1.Job
		secret corev1.Secret
		pvc    corev1.PersistentVolumeClaim
	)
	readManifest(t, "serve/deployment.yaml", &dep)
	readManifest(t, "serve/service.yaml", &svc)
	readManifest(t, "serve/pdb.yaml", &pdb)
	readManifest(t, "serve/ledger-init.yaml", &job)
	readManifest(t, "serve/ledger-secret.example.yaml", &secret)
	readManifest(t, "serve/models-pvc.yaml", &pvc)

	pod := dep.Spec.Template.Spec
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 || len(pod.Containers) != 1 {
		t.Fatalf("deployment: replicas %v, %d containers: want 3 replicas of one container", dep.Spec.Replicas, len(pod.Containers))
	}
	c := pod.Containers[0]
	flags := containerFlags(c.Args)
	if len(c.Command) != 0 || len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("deployment: command %q args %q: want the image's entrypoint and 'serve'", c.Command, c.Args)
	}
	// Pods: non-root, read-only root file system, no escalation, bounded.
	sc, csc := pod.SecurityContext, c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("deployment: pod security context %+v: want runAsNonRoot and a non-zero runAsUser", sc)
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("deployment: container security context %+v: want a read-only root file system, no privilege escalation", csc)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := c.Resources.Requests[r]; !ok {
			t.Errorf("deployment: no %s request", r)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
		t.Error("deployment: no memory limit")
	}
	// Probes: readiness on /readyz, liveness on /healthz, on the port --addr listens on.
	if len(c.Ports) != 1 || !strings.HasSuffix(flags["addr"], ":"+itoa(int(c.Ports[0].ContainerPort))) {
		t.Fatalf("deployment: --addr %q, ports %+v: want the container port", flags["addr"], c.Ports)
	}
	port := c.Ports[0]
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.ReadinessProbe, "/readyz"}, {c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != port.Name {
			t.Errorf("deployment: probe of %s: %+v", p.path, p.probe)
		}
	}
	if r := c.ReadinessProbe; r != nil && time.Duration(r.TimeoutSeconds)*time.Second <= parseDuration(t, flags["ledger-timeout"]) {
		t.Errorf("deployment: readiness timeout %ds, not above --ledger-timeout %s (the check pings the database)", r.TimeoutSeconds, flags["ledger-timeout"])
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= parseDuration(t, flags["shutdown-timeout"]) {
		t.Errorf("deployment: terminationGracePeriodSeconds %v, not above --shutdown-timeout %s: drains would be cut", g, flags["shutdown-timeout"])
	}
	// The ledger: the URL from a Secret through the environment, never in the args.
	env, secName, secKey := secretEnv(c)
	if flags["ledger"] != "env:"+env || env == "" || secName != secret.Name || secret.StringData[secKey] == "" {
		t.Errorf("deployment: --ledger %q, env %q from secret %q key %q: want env:VAR with VAR from the ledger Secret", flags["ledger"], env, secName, secKey)
	}
	if _, keysInLedger := flags["keys-in-ledger"]; !keysInLedger && flags["keys"] == "" {
		t.Error("deployment: no keys: --keys-in-ledger or --keys from a Secret")
	}
	// The model: on a read-only volume of the models claim.
	mounted := false
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name && m.ReadOnly &&
				strings.HasPrefix(flags["model"], m.MountPath+"/") {
				mounted = true
			}
		}
	}
	if !mounted || !slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany) {
		t.Errorf("deployment: --model %q is not on a read-only mount of the claim %q (ReadOnlyMany)", flags["model"], pvc.Name)
	}
	// The Service, the PodDisruptionBudget and the init Job select and agree.
	labels := dep.Spec.Template.Labels
	for k, v := range dep.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("deployment: the selector %v does not select its pods %v", dep.Spec.Selector.MatchLabels, labels)
		}
	}
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("service: selector %v does not select the pods %v", svc.Spec.Selector, labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != port.Name {
		t.Errorf("service: ports %+v: want the pods' port %q", svc.Spec.Ports, port.Name)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("pdb: selector %v does not select the pods %v", pdb.Spec.Selector.MatchLabels, labels)
		}
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 || pdb.Spec.MinAvailable.IntValue() >= int(*dep.Spec.Replicas) {
		t.Errorf("pdb: minAvailable %v: want 1 to replicas-1 (a drain must be possible, and a replica left)", pdb.Spec.MinAvailable)
	}
	ic := job.Spec.Template.Spec.Containers[0]
	ienv, isec, ikey := secretEnv(ic)
	if ic.Image != c.Image || ienv != env || isec != secName || ikey != secKey ||
		!slices.Equal(ic.Args[:3], []string{"serve", "ledger", "init"}) || containerFlags(ic.Args)["ledger"] != flags["ledger"] {
		t.Errorf("ledger-init: image %q args %q env %q: want the deployment's image and ledger", ic.Image, ic.Args, ienv)
	}
	dockerfile, err := os.ReadFile(filepath.Join(k8sDir, "serve", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "\nENTRYPOINT [\"nvdp\"]") || !strings.Contains(string(dockerfile), "\nUSER 65532:65532") {
		t.Error("serve/Dockerfile: want ENTRYPOINT [\"nvdp\"] and USER 65532:65532 (the manifests' runAsUser)")
	}

	// As the cluster would run it: the init Job, then two replicas.
	t.Setenv(env, pgtest.Shared(t).NewDatabase(t))
	if out, stderr, code := runHelper(t, ic.Args...); code != 0 {
		t.Fatalf("the init Job's command: exit %d %s\n%s", code, out, stderr)
	}
	out, stderr, code := runHelper(t, "serve", "keys", "add", "--ledger", flags["ledger"], "--id", "client", "--budget-epsilon", "100")
	key := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("keys add: exit %d\n%s", code, stderr)
	}
	var replicas []*serveProcess
	for range 2 {
		args := slices.Clone(c.Args)
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "--addr="):
				args[i] = "--addr=127.0.0.1:0"
			case strings.HasPrefix(a, "--model="):
				args[i] = "--model=fake"
			}
		}
		replicas = append(replicas, startServeArgs(t, 0, args...))
	}
	for i, p := range replicas {
		for _, path := range []string{"/readyz", "/healthz"} {
			if code, body := p.get(t, path, ""); code != 200 {
				t.Errorf("replica %d %s: %d %v", i, path, code, body)
			}
		}
		if code, ec := p.embedOne(t, key); code != 200 {
			t.Errorf("replica %d embed: %d %s", i, code, ec)
		}
	}
	out, stderr, code = runHelper(t, "serve", "ledger", "--ledger", flags["ledger"])
	var accts []nvledger.Account
	if code != 0 || json.Unmarshal([]byte(out), &accts) != nil || len(accts) != 1 || accts[0].Releases != 2 {
		t.Fatalf("the ledger after a release from each replica: exit %d %s\n%s", code, out, stderr)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// parseDuration parses a duration flag's value.
func parseDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("duration %q: %v", s, err)
	}
	return d
}
