package main

// GPU models and the vGPU profiles NVIDIA offers on them, kept as plain data.
//
// Profile names follow vSphere's form: <prefix><stem>-<FB GB><series> for
// time-sliced profiles and <prefix><stem>-<slices>-<FB GB>c[me] for MIG-backed
// ones (see the NVIDIA AI Enterprise user guide, appendix A).

import "fmt"

// nvidiaVendorID is the PCI vendor id of NVIDIA Corporation.
const nvidiaVendorID = 0x10DE

// migProfile is one MIG-backed vGPU size: GPU slices and frame buffer in GB.
type migProfile struct {
	Slices int
	FbGB   int
	Media  bool // the "+me" media extension variant (suffix "me")
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
var a100h100MIG = []migProfile{
	{1, 10, false}, {1, 20, false}, {2, 20, false}, {3, 40, false},
	{4, 40, false}, {7, 80, false}, {1, 10, true},
}

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
		MIG: []migProfile{
			{1, 18, false}, {1, 35, false}, {2, 35, false}, {3, 71, false},
			{4, 71, false}, {7, 141, false}, {1, 18, true},
		},
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
	Sharing string // "timeSliced" or "mig"
	Class   string // "compute" (C) or "quadro" (Q)
}

// profiles lists every vGPU profile the model offers, time-sliced first.
func (g *gpuModel) profiles() []vgpuProfile {
	var out []vgpuProfile
	for _, fb := range g.CSizes {
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%dc", g.Prefix, g.Stem, fb), fb, "timeSliced", "compute"})
	}
	for _, fb := range g.QSizes {
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%dq", g.Prefix, g.Stem, fb), fb, "timeSliced", "quadro"})
	}
	for _, m := range g.MIG {
		suffix := "c"
		if m.Media {
			suffix = "cme"
		}
		out = append(out, vgpuProfile{fmt.Sprintf("%s%s-%d-%d%s", g.Prefix, g.Stem, m.Slices, m.FbGB, suffix), m.FbGB, "mig", "compute"})
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
