package main

// GPU models and the vGPU profiles NVIDIA offers on them, kept as plain data.
//
// Profile names follow vSphere's form: <prefix><stem>-<FB GB><series> for
// time-sliced profiles and <prefix><stem>-<slices>-<FB GB>c[me] for MIG-backed
// ones (see the NVIDIA AI Enterprise user guide, appendix A).

import "fmt"

// nvidiaVendorID is the PCI vendor id of NVIDIA Corporation.
const nvidiaVendorID = 0x10DE

// migProfile is one MIG-backed vGPU size: GPU slices and frame buffer in GB,
// and the GPU instance behind it as NVIDIA's MIG user guide describes it
// ("Supported MIG profiles" of A100/H100/H200): the compute slices (of 7) and
// memory slices (of 8) it takes, how many such instances one GPU holds, and the
// memory-slice positions an instance may start at. The same table is
// plugins/module_utils/pure/_nvidia.py's _SHAPES (mig_placement), so the
// simulator refuses what the collection believes does not fit.
type migProfile struct {
	Slices int  // compute slices, also the "<slices>" of the profile name
	FbGB   int  // frame buffer
	Media  bool // the "+me" media extension variant (suffix "me")
	Mem    int  // memory slices (of migMemorySlices)
	Max    int  // instances of this profile per GPU
	Starts []int
}

const (
	migComputeSlices = 7
	migMemorySlices  = 8
)

// migShapes: (compute, memory, max instances, starts) per shape, with the
// frame buffer sizes of a model filled in by migCatalog.
func migCatalog(small, large, half, full int) []migProfile {
	return []migProfile{
		{Slices: 1, FbGB: small, Mem: 1, Max: 7, Starts: []int{0, 1, 2, 3, 4, 5, 6}},
		{Slices: 1, FbGB: large, Mem: 2, Max: 4, Starts: []int{0, 2, 4, 6}},
		{Slices: 2, FbGB: large, Mem: 2, Max: 3, Starts: []int{0, 2, 4}},
		{Slices: 3, FbGB: half, Mem: 4, Max: 2, Starts: []int{0, 4}},
		{Slices: 4, FbGB: half, Mem: 4, Max: 1, Starts: []int{0}},
		{Slices: 7, FbGB: full, Mem: 8, Max: 1, Starts: []int{0}},
		{Slices: 1, FbGB: small, Media: true, Mem: 1, Max: 1, Starts: []int{0, 1, 2, 3, 4, 5, 6}},
	}
}

// name is the GPU instance profile as nvidia-smi names it, e.g. "3g.40gb" or "1g.10gb+me".
func (m migProfile) name() string {
	s := fmt.Sprintf("%dg.%dgb", m.Slices, m.FbGB)
	if m.Media {
		s += "+me"
	}
	return s
}

// gpuModel describes one GPU board as ESXi reports it.
type gpuModel struct {
	Name        string // fleet file name, e.g. "H100-80GB"
	DeviceID    int    // PCI device id
	PciName     string // lspci-style name (HostPciDevice.deviceName)
	DisplayName string // HostGraphicsInfo.deviceName
	MemoryGB    int
	Prefix      string // "grid_" or "nvidia_"
	Stem        string // lower-case NVIDIA type stem, e.g. "h100"
	CSizes      []int  // time-sliced C-series frame buffer sizes (GB)
	QSizes      []int  // time-sliced Q-series frame buffer sizes (GB); empty when NVIDIA offers none
	MIG         []migProfile
}

// a100h100MIG is the MIG catalogue shared by A100-80GB and H100-80GB.
var a100h100MIG = migCatalog(10, 20, 40, 80)

// gpuModels is the catalogue the fleet file's gpu.model refers to.
var gpuModels = map[string]*gpuModel{
	"A100-80GB": {
		Name: "A100-80GB", DeviceID: 0x20B5,
		PciName: "GA100 [A100 PCIe 80GB]", DisplayName: "NVIDIA A100 80GB PCIe",
		MemoryGB: 80, Prefix: "grid_", Stem: "a100d",
		CSizes: []int{80, 40, 20, 16, 10, 8, 5, 4},
		MIG:    a100h100MIG,
	},
	"H100-80GB": {
		Name: "H100-80GB", DeviceID: 0x2331,
		PciName: "GH100 [H100 PCIe]", DisplayName: "NVIDIA H100 PCIe",
		MemoryGB: 80, Prefix: "nvidia_", Stem: "h100",
		CSizes: []int{80, 40, 20, 16, 10, 8, 5, 4},
		MIG:    a100h100MIG,
	},
	"H200-141GB": {
		Name: "H200-141GB", DeviceID: 0x2335,
		PciName: "GH100 [H200 SXM 141GB]", DisplayName: "NVIDIA H200",
		MemoryGB: 141, Prefix: "nvidia_", Stem: "h200x",
		// 141 GB divided by 1, 2, 3, 4, 5, 6, 8 and 10, rounded down.
		CSizes: []int{141, 70, 47, 35, 28, 23, 17, 14},
		MIG:    migCatalog(18, 35, 71, 141),
	},
	"L40S": {
		Name: "L40S", DeviceID: 0x26B9,
		PciName: "AD102GL [L40S]", DisplayName: "NVIDIA L40S",
		MemoryGB: 48, Prefix: "nvidia_", Stem: "l40s",
		// C-series (compute) starts at 4 GB; Q-series (vWS) goes down to 1 GB.
		CSizes: []int{48, 24, 16, 12, 8, 6, 4},
		QSizes: []int{48, 24, 16, 12, 8, 6, 4, 3, 2, 1},
		// no MIG on L40S
	},
}

// vgpuProfile is one profile a GPU model offers.
type vgpuProfile struct {
	Name    string // vSphere profile name, e.g. "nvidia_h100-3-40c"
	FbGB    int
	Sharing string      // "timeSliced" or "mig"
	Class   string      // "compute" (C) or "quadro" (Q)
	MIG     *migProfile // the GPU instance of a MIG-backed profile, else nil
}

// profiles lists every vGPU profile the model offers, time-sliced first.
func (g *gpuModel) profiles() []vgpuProfile {
	var out []vgpuProfile
	for _, fb := range g.CSizes {
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%dc", g.Prefix, g.Stem, fb), fb, "timeSliced", "compute", nil})
	}
	for _, fb := range g.QSizes {
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%dq", g.Prefix, g.Stem, fb), fb, "timeSliced", "quadro", nil})
	}
	for i := range g.MIG {
		m := &g.MIG[i]
		suffix := "c"
		if m.Media {
			suffix = "cme"
		}
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%d-%d%s", g.Prefix, g.Stem, m.Slices, m.FbGB, suffix), m.FbGB, "mig", "compute", m})
	}
	return out
}

// gpuBuses are the PCI buses GPUs sit on in a typical 2-socket server;
// hosts with more GPUs than listed get synthetic buses after them.
var gpuBuses = []int{0x3b, 0x5e, 0x86, 0xaf, 0x18, 0xd8, 0x40, 0xc0}

func gpuBus(i int) int {
	if i < len(gpuBuses) {
		return gpuBuses[i]
	}
	return 0xe0 + i - len(gpuBuses)
}

// pciID is the ESXi form of a PCI address, e.g. "0000:3b:00.0".
func pciID(bus int) string { return fmt.Sprintf("0000:%02x:00.0", bus) }
