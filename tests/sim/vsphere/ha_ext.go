package main

// HA admission control that vcsim drops. vcsim's ReconfigureComputeResource_Task
// keeps only dasConfig.enabled and dasConfig.admissionControlEnabled of a spec;
// vCenter keeps the admission control policy too (ClusterDasConfigInfo
// admissionControlPolicy and the failoverLevel it carries, vSphere Web Services
// API reference: ClusterDasConfigInfo, ClusterFailoverResourcesAdmissionControlPolicy).
// clusterOps runs vcsim's reconfigure, waits for its task, and when it succeeded
// sets the spec's policy on the cluster, so a failed reconfigure changes nothing.
// A percentage-based policy with a CPU or memory percentage outside 0-100, or a
// failover level below 1, is refused with InvalidArgument (a failed task).

import (
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

type clusterOps struct {
	Self    types.ManagedObjectReference
	cluster *simulator.ClusterComputeResource
}

func (c *clusterOps) Reference() types.ManagedObjectReference { return c.Self }

// admissionRefusal is the fault vCenter answers for a policy it does not take (nil: taken).
func admissionRefusal(policy types.BaseClusterDasAdmissionControlPolicy) types.BaseMethodFault {
	switch p := policy.(type) {
	case *types.ClusterFailoverResourcesAdmissionControlPolicy:
		if p.CpuFailoverResourcesPercent < 0 || p.CpuFailoverResourcesPercent > 100 ||
			p.MemoryFailoverResourcesPercent < 0 || p.MemoryFailoverResourcesPercent > 100 {
			return simFault(&types.InvalidArgument{InvalidProperty: "dasConfig.admissionControlPolicy"},
				"failover resources must be from 0 to 100 percent, not CPU %d, memory %d",
				p.CpuFailoverResourcesPercent, p.MemoryFailoverResourcesPercent)
		}
		if p.FailoverLevel < 0 {
			return simFault(&types.InvalidArgument{InvalidProperty: "dasConfig.admissionControlPolicy.failoverLevel"},
				"failover level %d is below 0", p.FailoverLevel)
		}
	case *types.ClusterFailoverLevelAdmissionControlPolicy:
		if p.FailoverLevel < 1 {
			return simFault(&types.InvalidArgument{InvalidProperty: "dasConfig.admissionControlPolicy.failoverLevel"},
				"failover level %d is below 1", p.FailoverLevel)
		}
	}
	return nil
}

func (c *clusterOps) ReconfigureComputeResourceTask(ctx *simulator.Context, req *types.ReconfigureComputeResource_Task) soap.HasFault {
	var das *types.ClusterDasConfigInfo
	if spec, ok := req.Spec.(*types.ClusterConfigSpecEx); ok {
		das = spec.DasConfig
	}
	if das != nil && das.AdmissionControlPolicy != nil {
		if fault := admissionRefusal(das.AdmissionControlPolicy); fault != nil {
			task := startTask(ctx, c.cluster, "reconfigureCluster", nil, func(*simulator.Task) (types.AnyType, types.BaseMethodFault) {
				return nil, fault
			})
			return &methods.ReconfigureComputeResource_TaskBody{Res: &types.ReconfigureComputeResource_TaskResponse{Returnval: task}}
		}
	}
	res := c.cluster.ReconfigureComputeResourceTask(ctx, req)
	body, ok := res.(*methods.ReconfigureComputeResource_TaskBody)
	if !ok || body.Res == nil || das == nil || (das.AdmissionControlPolicy == nil && das.FailoverLevel == 0) {
		return res
	}
	task, ok := ctx.Map.Get(body.Res.Returnval).(*simulator.Task)
	if !ok {
		return res
	}
	task.Wait()
	succeeded := false
	ctx.WithLock(task, func() { succeeded = task.Info.State == types.TaskInfoStateSuccess })
	if !succeeded {
		return res
	}
	ctx.WithLock(c.cluster, func() {
		cfg, ok := c.cluster.ConfigurationEx.(*types.ClusterConfigInfoEx)
		if !ok {
			return
		}
		if das.AdmissionControlPolicy != nil {
			cfg.DasConfig.AdmissionControlPolicy = das.AdmissionControlPolicy
		}
		if das.FailoverLevel != 0 {
			cfg.DasConfig.FailoverLevel = das.FailoverLevel
		}
	})
	return res
}
