package main

// Host-level managed objects vcsim lacks. Each is added with Registry.Put and
// pointed at from host.configManager; none wraps an existing simulator type.

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// GraphicsManager implements HostGraphicsManager.
type GraphicsManager struct {
	mo.HostGraphicsManager
	host *gpuHost
}

func (m *GraphicsManager) UpdateGraphicsConfig(ctx *simulator.Context, req *types.UpdateGraphicsConfig) soap.HasFault {
	body := new(methods.UpdateGraphicsConfigBody)
	g := m.host
	if msg, ok := sim.takeFault(g.spec.Name, "update_graphics"); ok {
		body.Fault_ = simulator.Fault(msg, simFault(&types.HostConfigFault{}, "%s", msg))
		return body
	}
	cfg := req.Config
	if err := checkGraphics(cfg.HostDefaultGraphicsType, cfg.SharedPassthruAssignmentPolicy); err != nil {
		body.Fault_ = simulator.Fault(err.Error(), simFault(&types.InvalidArgument{InvalidProperty: "config"}, "%v", err))
		return body
	}
	known := map[string]bool{}
	for _, id := range g.gpuPciIDs() {
		known[id] = true
	}
	for _, d := range cfg.DeviceType {
		if !known[d.DeviceId] {
			msg := fmt.Sprintf("unknown graphics device %q on host %s", d.DeviceId, g.spec.Name)
			body.Fault_ = simulator.Fault(msg, simFault(&types.InvalidArgument{InvalidProperty: "config.deviceType.deviceId"}, "%s", msg))
			return body
		}
		if err := checkGraphics(d.GraphicsType, cfg.SharedPassthruAssignmentPolicy); err != nil {
			body.Fault_ = simulator.Fault(err.Error(), simFault(&types.InvalidArgument{InvalidProperty: "config.deviceType.graphicsType"}, "%v", err))
			return body
		}
		if d.VgpuMode != "" && d.VgpuMode != vgpuSameSize && d.VgpuMode != vgpuMixedSize {
			msg := fmt.Sprintf("vGPU mode %q of graphics device %s is not sameSize or mixedSize", d.VgpuMode, d.DeviceId)
			body.Fault_ = simulator.Fault(msg, simFault(&types.InvalidArgument{InvalidProperty: "config.deviceType.vgpuMode"}, "%s", msg))
			return body
		}
	}
	sim.mu.Lock()
	// The vGPU mode of a GPU that carries a powered-on vGPU VM does not change
	// (the simulator's reading, see README.md); nothing is changed then.
	for _, d := range cfg.DeviceType {
		for i, id := range g.gpuPciIDs() {
			if d.DeviceId != id || d.VgpuMode == "" || d.VgpuMode == g.vgpuMode[i] || !g.busy(i) {
				continue
			}
			var names []string
			for _, v := range g.placed[i] {
				names = append(names, v.Name)
			}
			sim.mu.Unlock()
			msg := fmt.Sprintf("cannot change the vGPU mode of GPU %s on host %s to %s while powered-on VMs use it: %s",
				id, g.spec.Name, d.VgpuMode, strings.Join(names, ", "))
			body.Fault_ = simulator.Fault(msg, simFault(&types.InvalidState{}, "%s", msg))
			return body
		}
	}
	// Devices not named keep their configured type, like ESXi.
	merged := types.HostGraphicsConfig{
		HostDefaultGraphicsType:        cfg.HostDefaultGraphicsType,
		SharedPassthruAssignmentPolicy: cfg.SharedPassthruAssignmentPolicy,
	}
	for _, id := range g.gpuPciIDs() {
		t := g.deviceGraphicsType(id)
		for j, gid := range g.gpuPciIDs() {
			if gid != id {
				continue
			}
			for _, d := range cfg.DeviceType {
				if d.DeviceId == id {
					t = d.GraphicsType
					if d.VgpuMode != "" { // unset: the mode remains unchanged (API reference)
						g.vgpuMode[j] = d.VgpuMode
					}
				}
			}
		}
		merged.DeviceType = append(merged.DeviceType, types.HostGraphicsConfigDeviceType{DeviceId: id, GraphicsType: t})
	}
	g.graphics = merged
	sim.mu.Unlock()
	sim.render(ctx, g)
	body.Res = new(types.UpdateGraphicsConfigResponse)
	return body
}

func (m *GraphicsManager) IsSharedGraphicsActive(ctx *simulator.Context, req *types.IsSharedGraphicsActive) soap.HasFault {
	sim.mu.Lock()
	active := m.host.spec.GPUCount > 0 && m.host.running != ""
	sim.mu.Unlock()
	return &methods.IsSharedGraphicsActiveBody{Res: &types.IsSharedGraphicsActiveResponse{Returnval: active}}
}

func (m *GraphicsManager) RefreshGraphicsManager(ctx *simulator.Context, req *types.RefreshGraphicsManager) soap.HasFault {
	sim.render(ctx, m.host)
	return &methods.RefreshGraphicsManagerBody{Res: new(types.RefreshGraphicsManagerResponse)}
}

// KernelModuleSystem implements HostKernelModuleSystem.
type KernelModuleSystem struct {
	mo.HostKernelModuleSystem
	host *gpuHost
}

// otherModules are a few non-NVIDIA modules every host reports.
var otherModules = []string{"vmkernel", "nmlx5_core", "lpfc"}

func (m *KernelModuleSystem) known(name string) bool {
	if name == "nvidia" {
		return m.host.running != "" || m.host.installed != ""
	}
	for _, n := range otherModules {
		if n == name {
			return true
		}
	}
	return false
}

func moduleNotFound(name string) *soap.Fault {
	msg := fmt.Sprintf("module %s not found", name)
	return simulator.Fault(msg, simFault(&types.NotFound{}, "%s", msg))
}

func (m *KernelModuleSystem) QueryConfiguredModuleOptionString(ctx *simulator.Context, req *types.QueryConfiguredModuleOptionString) soap.HasFault {
	body := new(methods.QueryConfiguredModuleOptionStringBody)
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if !m.known(req.Name) {
		body.Fault_ = moduleNotFound(req.Name)
		return body
	}
	opts := ""
	if req.Name == "nvidia" {
		opts = m.host.nvidiaOptions
	}
	body.Res = &types.QueryConfiguredModuleOptionStringResponse{Returnval: opts}
	return body
}

func (m *KernelModuleSystem) UpdateModuleOptionString(ctx *simulator.Context, req *types.UpdateModuleOptionString) soap.HasFault {
	body := new(methods.UpdateModuleOptionStringBody)
	if msg, ok := sim.takeFault(m.host.spec.Name, "update_module_options"); ok {
		body.Fault_ = simulator.Fault(msg, simFault(&types.HostConfigFault{}, "%s", msg))
		return body
	}
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if !m.known(req.Name) {
		body.Fault_ = moduleNotFound(req.Name)
		return body
	}
	if req.Name == "nvidia" {
		// ESXi replaces the option string wholesale; it takes effect on reboot.
		m.host.nvidiaOptions = req.Options
	}
	body.Res = new(types.UpdateModuleOptionStringResponse)
	return body
}

func (m *KernelModuleSystem) QueryModules(ctx *simulator.Context, req *types.QueryModules) soap.HasFault {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	var mods []types.KernelModuleInfo
	for i, n := range otherModules {
		mods = append(mods, types.KernelModuleInfo{Id: int32(i + 1), Name: n, Version: "8.0.3", Filename: "/usr/lib/vmware/vmkmod/" + n, Loaded: true, Enabled: true, UseCount: 1})
	}
	if m.host.running != "" {
		mods = append(mods, types.KernelModuleInfo{
			Id: int32(len(mods) + 1), Name: "nvidia", Version: m.host.running,
			Filename: "/usr/lib/vmware/vmkmod/nvidia", OptionString: m.host.nvidiaOptions,
			Loaded: true, Enabled: true, UseCount: int32(m.host.spec.GPUCount),
		})
	}
	return &methods.QueryModulesBody{Res: &types.QueryModulesResponse{Returnval: mods}}
}

// ImageConfigManager implements HostImageConfigManager.
type ImageConfigManager struct {
	mo.HostImageConfigManager
	host *gpuHost
}

var installDate = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func vib(name, version, vendor, summary string) types.SoftwarePackage {
	mm := true
	return types.SoftwarePackage{
		Name: name, Version: version, Type: "bootbank", Vendor: vendor,
		AcceptanceLevel: "VMwareAccepted", Summary: summary, Description: summary,
		CreationDate: &installDate, MaintenanceModeRequired: &mm,
	}
}

func (m *ImageConfigManager) FetchSoftwarePackages(ctx *simulator.Context, req *types.FetchSoftwarePackages) soap.HasFault {
	sim.mu.Lock()
	version := m.host.installed
	sim.mu.Unlock()
	pkgs := []types.SoftwarePackage{
		vib("esx-base", "8.0.3-0.0.24022510", "VMware", "ESXi base system"),
		vib("nmlx5-core", "4.23.0.66-2vmw.803.0.0.24022510", "VMW", "Mellanox ConnectX-4/5/6 core driver"),
	}
	if version != "" {
		pkgs = append(pkgs,
			vib("NVD-AIE_ESXi_8.0.0_Driver", version, "NVIDIA", "NVIDIA AI Enterprise vGPU driver for VMWare ESX-8.0.0"),
			vib("nvdgpumgmtdaemon", version, "NVIDIA", "NVIDIA GPU monitoring and management daemon"),
		)
		pkgs[len(pkgs)-2].AcceptanceLevel = "VMwareAccepted"
		pkgs[len(pkgs)-1].AcceptanceLevel = "PartnerSupported"
	}
	return &methods.FetchSoftwarePackagesBody{Res: &types.FetchSoftwarePackagesResponse{Returnval: pkgs}}
}

func (m *ImageConfigManager) HostImageConfigGetAcceptance(ctx *simulator.Context, req *types.HostImageConfigGetAcceptance) soap.HasFault {
	return &methods.HostImageConfigGetAcceptanceBody{Res: &types.HostImageConfigGetAcceptanceResponse{Returnval: "PartnerSupported"}}
}

// PatchManager implements HostPatchManager's V2 install and scan.
type PatchManager struct {
	mo.HostPatchManager
	host *gpuHost
}

// Driver bundle and VIB file names, see vsphere-nvidia-k8s facts §3.1:
// NVD-AIE-800_<version>_<build>.zip and NVD-AIE_ESXi_8.0.0_Driver_<version>.vib
var (
	bundleRE = regexp.MustCompile(`^NVD-AIE-[0-9]+_(.+)_[0-9]+\.zip$`)
	vibRE    = regexp.MustCompile(`^NVD-AIE_ESXi_[0-9.]+_Driver_(.+)\.vib$`)
)

// driverVersionOf returns the driver version named by the first NVIDIA
// bundle or VIB among the URLs.
func driverVersionOf(urls ...[]string) (string, bool) {
	for _, list := range urls {
		for _, u := range list {
			base := path.Base(u)
			if m := bundleRE.FindStringSubmatch(base); m != nil {
				return m[1], true
			}
			if m := vibRE.FindStringSubmatch(base); m != nil {
				return m[1], true
			}
		}
	}
	return "", false
}

func (m *PatchManager) InstallHostPatchV2Task(ctx *simulator.Context, req *types.InstallHostPatchV2_Task) soap.HasFault {
	g := m.host
	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	fail, hold := hostFault(host, "install")
	task := startTask(ctx, host, "installHostPatchV2", hold, func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		if fail != "" {
			return nil, simFault(&types.PlatformConfigFault{Text: fail}, "%s", fail)
		}
		if !host.Runtime.InMaintenanceMode {
			return nil, simFault(&types.InvalidState{}, "host %s is not in maintenance mode: the NVIDIA driver can only be installed in maintenance mode", g.spec.Name)
		}
		version, ok := driverVersionOf(req.BundleUrls, req.VibUrls, req.MetaUrls)
		if !ok {
			return nil, simFault(&types.PlatformConfigFault{Text: "no NVIDIA component in bundle"}, "no NVIDIA component in bundle")
		}
		sim.mu.Lock()
		// Like ESXi: the new VIB is listed at once, it loads after a reboot.
		g.installed = version
		g.rebootRequired = g.installed != g.running
		sim.mu.Unlock()
		host.Summary.RebootRequired = g.rebootRequired
		return types.HostPatchManagerResult{
			Version: "1.0",
			Status: []types.HostPatchManagerStatus{{
				Id: "NVD-AIE-800", Applicable: true, Installed: true,
				ReconnectRequired: false, RestartRequired: true,
				Reason: []string{}, Integrity: "validated", InstallState: []string{"hostRestarted"},
			}},
			XmlResult: fmt.Sprintf("<esxupdate-response><version>1.0</version><installed>NVD-AIE_ESXi_8.0.0_Driver_%s</installed><reboot-required>true</reboot-required></esxupdate-response>", version),
		}, nil
	})
	return &methods.InstallHostPatchV2_TaskBody{Res: &types.InstallHostPatchV2_TaskResponse{Returnval: task}}
}

func (m *PatchManager) ScanHostPatchV2Task(ctx *simulator.Context, req *types.ScanHostPatchV2_Task) soap.HasFault {
	g := m.host
	host := ctx.Map.Get(g.ref).(*simulator.HostSystem)
	task := simulator.CreateTask(host, "scanHostPatchV2", func(t *simulator.Task) (types.AnyType, types.BaseMethodFault) {
		version, ok := driverVersionOf(req.MetaUrls, req.BundleUrls)
		sim.mu.Lock()
		installed := g.installed
		sim.mu.Unlock()
		var status []types.HostPatchManagerStatus
		if ok {
			status = append(status, types.HostPatchManagerStatus{
				Id: "NVD-AIE-800", Applicable: version != installed, Installed: version == installed,
				RestartRequired: true, Integrity: "validated",
			})
		}
		return types.HostPatchManagerResult{Version: "1.0", Status: status}, nil
	})
	return &methods.ScanHostPatchV2_TaskBody{Res: &types.ScanHostPatchV2_TaskResponse{Returnval: task.Run(ctx)}}
}
