package main

// The fleet file: which clusters, GPU hosts and VMs the simulator starts with.

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

type fleetFile struct {
	Datacenter string         `yaml:"datacenter"`
	Clusters   []fleetCluster `yaml:"clusters"`
	VMs        []fleetVM      `yaml:"vms"`
	Accounts   []fleetAccount `yaml:"accounts"` // restricted accounts (accounts.go)
}

type fleetCluster struct {
	Name       string      `yaml:"name"`
	Supervisor bool        `yaml:"supervisor"`
	Lifecycle  string      `yaml:"lifecycle"` // vlcm (desired image, vlcm.go) or baseline (default)
	Hosts      []fleetHost `yaml:"hosts"`
}

// fleetHost is either one host (name) or a group (prefix + count).
type fleetHost struct {
	Name          string         `yaml:"name"`
	Prefix        string         `yaml:"prefix"`
	Count         int            `yaml:"count"`
	GPU           *fleetGPU      `yaml:"gpu"`
	DriverVersion string         `yaml:"driver_version"`
	Graphics      *fleetGraphics `yaml:"graphics"`
	NvidiaOptions string         `yaml:"nvidia_options"`
	Maintenance   bool           `yaml:"maintenance"`
	// MIG: the GPUs in MIG mode at start (current and pending): a list of
	// GPU indexes or "all"; default none.
	MIG      *fleetMIG `yaml:"mig"`
	VgpuMode string    `yaml:"vgpu_mode"` // same_size (default) | mixed_size, every GPU
	SSH      string    `yaml:"ssh"`       // running | stopped (default): the TSM-SSH service
	Lockdown string    `yaml:"lockdown"`  // disabled (default) | normal | strict
	// users that keep access in lockdown mode (HostAccessManager exceptions)
	LockdownExceptions []string `yaml:"lockdown_exceptions"`
}

// fleetMIG is a host's mig key: "all" or a list of GPU indexes.
type fleetMIG struct {
	All     bool
	Indexes []int
}

func (m *fleetMIG) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.ScalarNode {
		if node.Value == "all" {
			m.All = true
			return nil
		}
		return fmt.Errorf("line %d: mig must be all or a list of GPU indexes, not %q", node.Line, node.Value)
	}
	if err := node.Decode(&m.Indexes); err != nil {
		return fmt.Errorf("line %d: mig must be all or a list of GPU indexes: %v", node.Line, err)
	}
	return nil
}

type fleetGPU struct {
	Model string `yaml:"model"`
	Count int    `yaml:"count"`
}

type fleetGraphics struct {
	Default string `yaml:"default"`
	Policy  string `yaml:"policy"`
}

type fleetVM struct {
	Name    string   `yaml:"name"`
	Host    string   `yaml:"host"`
	Cluster string   `yaml:"cluster"`
	VGPU    []string `yaml:"vgpu"`
	Power   string   `yaml:"power"`
	Count   int      `yaml:"count"`
}

// hostSpec is one expanded host of the fleet.
type hostSpec struct {
	Name          string
	Cluster       string
	Model         *gpuModel // nil: no GPU
	GPUCount      int
	Driver        string
	GraphicsType  string
	Policy        string
	NvidiaOptions string
	Maintenance   bool
	MIG           []bool // per GPU: MIG mode at start
	VgpuMode      string // sameSize | mixedSize
	SSHRunning    bool
	Lockdown      string // lockdownDisabled | lockdownNormal | lockdownStrict
	Exceptions    []string
}

// vmSpec is one expanded VM of the fleet.
type vmSpec struct {
	Name    string
	Host    string // set when pinned to a host
	Cluster string // set when placed round-robin in a cluster
	VGPU    []string
	PowerOn bool
}

func loadFleet(path string) (*fleetFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := new(fleetFile)
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(f); err != nil {
		return nil, fmt.Errorf("fleet %s: %w", path, err)
	}
	if f.Datacenter == "" {
		f.Datacenter = "DC0"
	}
	return f, nil
}

// numbered returns base01..baseNN (zero-padded to 2, or 3 when n > 99).
func numbered(base string, n int) []string {
	width := 2
	if n > 99 {
		width = 3
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%0*d", base, width, i+1)
	}
	return out
}

// expand checks the fleet and returns the flat host and VM lists.
func (f *fleetFile) expand() ([]hostSpec, []vmSpec, error) {
	var hosts []hostSpec
	seen := map[string]bool{}
	clusters := map[string]bool{}
	for _, c := range f.Clusters {
		if c.Name == "" {
			return nil, nil, fmt.Errorf("a cluster has no name")
		}
		if clusters[c.Name] {
			return nil, nil, fmt.Errorf("cluster %q listed twice", c.Name)
		}
		clusters[c.Name] = true
		switch c.Lifecycle {
		case "", "baseline", "vlcm":
			clusterLifecycle[c.Name] = c.Lifecycle
		default:
			return nil, nil, fmt.Errorf("cluster %s: lifecycle must be vlcm or baseline", c.Name)
		}
		for _, h := range c.Hosts {
			var names []string
			switch {
			case h.Name != "" && h.Prefix == "":
				names = []string{h.Name}
			case h.Prefix != "" && h.Name == "" && h.Count > 0:
				names = numbered(h.Prefix, h.Count)
			default:
				return nil, nil, fmt.Errorf("cluster %s: each host needs either name, or prefix and count > 0", c.Name)
			}
			spec := hostSpec{
				Cluster:       c.Name,
				Driver:        h.DriverVersion,
				GraphicsType:  "shared",
				Policy:        "performance",
				NvidiaOptions: h.NvidiaOptions,
				Maintenance:   h.Maintenance,
			}
			if h.GPU != nil && h.GPU.Count > 0 {
				m, ok := gpuModels[h.GPU.Model]
				if !ok {
					return nil, nil, fmt.Errorf("cluster %s: unknown GPU model %q", c.Name, h.GPU.Model)
				}
				spec.Model, spec.GPUCount = m, h.GPU.Count
			}
			if h.Graphics != nil {
				if h.Graphics.Default != "" {
					spec.GraphicsType = h.Graphics.Default
				}
				if h.Graphics.Policy != "" {
					spec.Policy = h.Graphics.Policy
				}
			}
			if err := checkGraphics(spec.GraphicsType, spec.Policy); err != nil {
				return nil, nil, fmt.Errorf("cluster %s: %v", c.Name, err)
			}
			if err := hostExtras(&spec, h); err != nil {
				return nil, nil, fmt.Errorf("cluster %s, host %s: %v", c.Name, h.Name+h.Prefix, err)
			}
			for _, n := range names {
				if seen[n] {
					return nil, nil, fmt.Errorf("host %q listed twice", n)
				}
				seen[n] = true
				s := spec
				s.Name = n
				hosts = append(hosts, s)
			}
		}
	}

	var vms []vmSpec
	vmNames := map[string]bool{}
	for _, v := range f.VMs {
		if v.Name == "" {
			return nil, nil, fmt.Errorf("a VM has no name")
		}
		if (v.Host == "") == (v.Cluster == "") {
			return nil, nil, fmt.Errorf("vm %s: give exactly one of host or cluster", v.Name)
		}
		if v.Host != "" && !seen[v.Host] {
			return nil, nil, fmt.Errorf("vm %s: unknown host %q", v.Name, v.Host)
		}
		if v.Cluster != "" && !clusters[v.Cluster] {
			return nil, nil, fmt.Errorf("vm %s: unknown cluster %q", v.Name, v.Cluster)
		}
		power := true
		switch v.Power {
		case "", "on":
		case "off":
			power = false
		default:
			return nil, nil, fmt.Errorf("vm %s: power must be on or off", v.Name)
		}
		names := []string{v.Name}
		if v.Count > 1 {
			names = numbered(v.Name+"-", v.Count)
		}
		for _, n := range names {
			if vmNames[n] {
				return nil, nil, fmt.Errorf("vm %q listed twice", n)
			}
			vmNames[n] = true
			vms = append(vms, vmSpec{Name: n, Host: v.Host, Cluster: v.Cluster, VGPU: v.VGPU, PowerOn: power})
		}
	}
	return hosts, vms, nil
}

// checkGraphics validates a graphics type and assignment policy like ESXi does.
func checkGraphics(kind, policy string) error {
	if kind != "shared" && kind != "sharedDirect" {
		return fmt.Errorf("graphics type %q is not shared or sharedDirect", kind)
	}
	if policy != "performance" && policy != "consolidation" {
		return fmt.Errorf("assignment policy %q is not performance or consolidation", policy)
	}
	return nil
}

// hostExtras reads a host's mig, vgpu_mode, ssh, lockdown and
// lockdown_exceptions keys into its spec.
func hostExtras(spec *hostSpec, h fleetHost) error {
	spec.MIG = make([]bool, spec.GPUCount)
	if h.MIG != nil && (h.MIG.All || len(h.MIG.Indexes) > 0) {
		if spec.Model == nil || len(spec.Model.MIG) == 0 {
			model := "no GPU"
			if spec.Model != nil {
				model = spec.Model.Name
			}
			return fmt.Errorf("mig: the host's GPUs (%s) have no MIG mode", model)
		}
		for i := range spec.MIG {
			spec.MIG[i] = h.MIG.All
		}
		for _, i := range h.MIG.Indexes {
			if i < 0 || i >= spec.GPUCount {
				return fmt.Errorf("mig: GPU index %d out of range (the host has %d GPUs, 0 to %d)", i, spec.GPUCount, spec.GPUCount-1)
			}
			spec.MIG[i] = true
		}
	}
	switch h.VgpuMode {
	case "", "same_size":
		spec.VgpuMode = vgpuSameSize
	case "mixed_size":
		spec.VgpuMode = vgpuMixedSize
	default:
		return fmt.Errorf("vgpu_mode must be same_size or mixed_size, not %q", h.VgpuMode)
	}
	switch h.SSH {
	case "", "stopped":
	case "running":
		spec.SSHRunning = true
	default:
		return fmt.Errorf("ssh must be running or stopped, not %q", h.SSH)
	}
	switch h.Lockdown {
	case "", "disabled", "normal", "strict":
		mode, _ := lockdownMode(h.Lockdown)
		spec.Lockdown = string(mode)
	default:
		return fmt.Errorf("lockdown must be disabled, normal or strict, not %q", h.Lockdown)
	}
	spec.Exceptions = append([]string(nil), h.LockdownExceptions...)
	return nil
}
