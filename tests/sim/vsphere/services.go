package main

// The host's service system (HostServiceSystem with the TSM-SSH service) and
// access manager (HostAccessManager: lockdown mode and its exception users),
// which govmomi's simulator lacks: vcsim's host template points
// configManager.serviceSystem and hostAccessManager at objects that are not in
// its registry. Each host gets its own, added with Registry.Put.

import (
	"fmt"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

const sshServiceKey = "TSM-SSH"

// fixedServices are services every host lists besides TSM-SSH, with their
// state on a fresh ESXi install (DCUI runs; the ESXi Shell does not).
var fixedServices = []types.HostService{
	{Key: "DCUI", Label: "Direct Console UI", Required: false, Running: true, Policy: "on",
		SourcePackage: &types.HostServiceSourcePackage{SourcePackageName: "esx-base", Description: "This VIB contains all of the base functionality of vSphere ESXi."}},
	{Key: "TSM", Label: "ESXi Shell", Required: false, Running: false, Policy: "off",
		SourcePackage: &types.HostServiceSourcePackage{SourcePackageName: "esx-base", Description: "This VIB contains all of the base functionality of vSphere ESXi."}},
}

// serviceInfo is HostServiceInfo of the host (call with sim.mu held).
func (g *gpuHost) serviceInfo() types.HostServiceInfo {
	policy := g.sshPolicy
	if policy == "" {
		policy = "off"
	}
	out := types.HostServiceInfo{}
	out.Service = append(out.Service, fixedServices[0])
	out.Service = append(out.Service, fixedServices[1])
	out.Service = append(out.Service, types.HostService{
		Key: sshServiceKey, Label: "SSH", Required: false, Running: g.sshRunning, Ruleset: []string{"sshServer"},
		Policy:        policy,
		SourcePackage: &types.HostServiceSourcePackage{SourcePackageName: "esx-base", Description: "This VIB contains all of the base functionality of vSphere ESXi."},
	})
	return out
}

// sshServiceRunning: the host's TSM-SSH service runs.
func sshServiceRunning(g *gpuHost) bool {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	return g.sshRunning
}

// sshAdmits says whether the host lets user log in over SSH now: in lockdown
// mode (normal or strict) only the exception users keep shell access (VMware
// vSphere Security guide, "Lockdown Mode Behavior"; every exception user is
// taken to hold administrator privileges here).
func sshAdmits(g *gpuHost, user string) error {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if !g.sshRunning {
		return fmt.Errorf("the TSM-SSH service of %s is stopped", g.spec.Name)
	}
	if g.lockdown == types.HostLockdownModeLockdownNormal || g.lockdown == types.HostLockdownModeLockdownStrict {
		for _, u := range g.lockdownExceptions {
			if u == user {
				return nil
			}
		}
		return fmt.Errorf("host %s is in %s and %s is not an exception user", g.spec.Name, g.lockdown, user)
	}
	return nil
}

// ServiceSystem implements HostServiceSystem.
type ServiceSystem struct {
	mo.HostServiceSystem
	host *gpuHost
}

// known returns whether the host has the service id.
func (m *ServiceSystem) known(id string) bool {
	if id == sshServiceKey {
		return true
	}
	for _, s := range fixedServices {
		if s.Key == id {
			return true
		}
	}
	return false
}

func serviceNotFound(id string) *soap.Fault {
	msg := fmt.Sprintf("service %s not found", id)
	return simulator.Fault(msg, simFault(&types.NotFound{}, "%s", msg))
}

// setSSH changes the TSM-SSH service and shows it in serviceInfo and config.service.
func (m *ServiceSystem) setSSH(ctx *simulator.Context, running *bool, policy string) {
	sim.mu.Lock()
	if running != nil {
		m.host.sshRunning = *running
	}
	if policy != "" {
		m.host.sshPolicy = policy
	}
	info := m.host.serviceInfo()
	sim.mu.Unlock()
	m.ServiceInfo = info
	sim.render(ctx, m.host) // config.service of the host follows at once

}

// switchService is the work of StartService, StopService and RestartService: a fault for a service
// the host does not list, else the service running (or not) from now on (only TSM-SSH has a state
// the simulator keeps).
func (m *ServiceSystem) switchService(ctx *simulator.Context, id string, running bool) *soap.Fault {
	if !m.known(id) {
		return serviceNotFound(id)
	}
	if id == sshServiceKey {
		m.setSSH(ctx, &running, "")
	}
	return nil
}

func (m *ServiceSystem) StartService(ctx *simulator.Context, req *types.StartService) soap.HasFault {
	body := new(methods.StartServiceBody)
	if body.Fault_ = m.switchService(ctx, req.Id, true); body.Fault_ == nil {
		body.Res = new(types.StartServiceResponse)
	}
	return body
}

func (m *ServiceSystem) StopService(ctx *simulator.Context, req *types.StopService) soap.HasFault {
	body := new(methods.StopServiceBody)
	if body.Fault_ = m.switchService(ctx, req.Id, false); body.Fault_ == nil {
		body.Res = new(types.StopServiceResponse)
	}
	return body
}

func (m *ServiceSystem) RestartService(ctx *simulator.Context, req *types.RestartService) soap.HasFault {
	body := new(methods.RestartServiceBody)
	if body.Fault_ = m.switchService(ctx, req.Id, true); body.Fault_ == nil {
		body.Res = new(types.RestartServiceResponse)
	}
	return body
}

func (m *ServiceSystem) UpdateServicePolicy(ctx *simulator.Context, req *types.UpdateServicePolicy) soap.HasFault {
	body := new(methods.UpdateServicePolicyBody)
	if !m.known(req.Id) {
		body.Fault_ = serviceNotFound(req.Id)
		return body
	}
	switch req.Policy {
	case "on", "off", "automatic":
	default:
		msg := fmt.Sprintf("service policy %q is not on, off or automatic", req.Policy)
		body.Fault_ = simulator.Fault(msg, simFault(&types.InvalidArgument{InvalidProperty: "policy"}, "%s", msg))
		return body
	}
	if req.Id == sshServiceKey {
		m.setSSH(ctx, nil, req.Policy)
	}
	body.Res = new(types.UpdateServicePolicyResponse)
	return body
}

func (m *ServiceSystem) RefreshServices(ctx *simulator.Context, req *types.RefreshServices) soap.HasFault {
	m.setSSH(ctx, nil, "")
	return &methods.RefreshServicesBody{Res: new(types.RefreshServicesResponse)}
}

// AccessManager implements HostAccessManager's lockdown calls.
type AccessManager struct {
	mo.HostAccessManager
	host *gpuHost
}

func (m *AccessManager) QueryLockdownExceptions(ctx *simulator.Context, req *types.QueryLockdownExceptions) soap.HasFault {
	sim.mu.Lock()
	users := append([]string(nil), m.host.lockdownExceptions...)
	sim.mu.Unlock()
	return &methods.QueryLockdownExceptionsBody{Res: &types.QueryLockdownExceptionsResponse{Returnval: users}}
}

func (m *AccessManager) UpdateLockdownExceptions(ctx *simulator.Context, req *types.UpdateLockdownExceptions) soap.HasFault {
	sim.mu.Lock()
	m.host.lockdownExceptions = append([]string(nil), req.Users...)
	sim.mu.Unlock()
	return &methods.UpdateLockdownExceptionsBody{Res: new(types.UpdateLockdownExceptionsResponse)}
}

func (m *AccessManager) ChangeLockdownMode(ctx *simulator.Context, req *types.ChangeLockdownMode) soap.HasFault {
	body := new(methods.ChangeLockdownModeBody)
	mode, err := lockdownMode(string(req.Mode))
	if err != nil {
		body.Fault_ = simulator.Fault(err.Error(), simFault(&types.InvalidArgument{InvalidProperty: "mode"}, "%v", err))
		return body
	}
	sim.mu.Lock()
	m.host.lockdown = mode
	sim.mu.Unlock()
	m.LockdownMode = mode
	sim.render(ctx, m.host)
	body.Res = new(types.ChangeLockdownModeResponse)
	return body
}

// lockdownMode reads lockdownDisabled|lockdownNormal|lockdownStrict, or the
// fleet's disabled|normal|strict.
func lockdownMode(s string) (types.HostLockdownMode, error) {
	switch strings.TrimPrefix(strings.ToLower(s), "lockdown") {
	case "disabled", "":
		return types.HostLockdownModeLockdownDisabled, nil
	case "normal":
		return types.HostLockdownModeLockdownNormal, nil
	case "strict":
		return types.HostLockdownModeLockdownStrict, nil
	}
	return "", fmt.Errorf("lockdown mode %q is not lockdownDisabled, lockdownNormal or lockdownStrict", s)
}
