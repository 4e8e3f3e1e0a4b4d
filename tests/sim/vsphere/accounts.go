package main

// Restricted accounts (the fleet's accounts key): a user with one role (a list
// of privilege ids) granted on the root folder or on named datacenters,
// clusters and hosts, propagating down the inventory as a vSphere permission
// with propagate set does. A session of such a user gets its answers to
// HasPrivilegeOnEntities, HasPrivilegeOnEntity, HasUserPrivilegeOnEntities and
// FetchUserPrivilegeOnEntities from that role, and the state-changing calls
// of privilegedCalls (SOAP) and of the vLCM API (REST) fail with NoPermission
// (SOAP) or 403 UNAUTHORIZED (REST) where the role does not hold the
// privilege on the object, as vCenter refuses them. The simulator's own
// user (-username) keeps every privilege everywhere. Sources: README.md,
// "Accounts and privileges".

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

type fleetAccount struct {
	User     string    `yaml:"user"`
	Password string    `yaml:"password"`
	Role     fleetRole `yaml:"role"`
	// the objects the role is granted on (propagating): root, or the name of
	// the datacenter, a cluster or a host of the fleet; default root
	On []string `yaml:"on"`
}

type fleetRole struct {
	Name       string   `yaml:"name"`
	Privileges []string `yaml:"privileges"`
}

// account is a restricted account as the simulator holds it.
type account struct {
	user, password string
	role           string
	privileges     map[string]bool // the role's, with the System ones vCenter adds to every role
	on             map[types.ManagedObjectReference]bool
}

var accounts = struct {
	mu     sync.RWMutex
	byUser map[string]*account
}{byUser: map[string]*account{}}

// restricted is the account of a user name, or nil for the simulator's own
// user (and any other), which holds every privilege.
func restricted(user string) *account {
	accounts.mu.RLock()
	defer accounts.mu.RUnlock()
	return accounts.byUser[user]
}

func authzManager(reg *simulator.Registry) *simulator.AuthorizationManager {
	si, _ := reg.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	if si == nil || si.Content.AuthorizationManager == nil {
		return nil
	}
	m, _ := reg.Get(*si.Content.AuthorizationManager).(*simulator.AuthorizationManager)
	return m
}

// setupAccounts adds each account's role to the AuthorizationManager (which
// refuses a privilege id vCenter does not define), its permissions on the
// objects it names, and lets its user log in next to the simulator's own.
func setupAccounts(reg *simulator.Registry, list []fleetAccount, adminUser, adminPassword string) error {
	ctx := &simulator.Context{Context: context.Background(), Map: reg,
		Session: &simulator.Session{UserSession: types.UserSession{Key: "gpupool-sim-admin", UserName: adminUser}}}
	mgr := authzManager(reg)
	if mgr == nil {
		return fmt.Errorf("accounts: vcsim has no AuthorizationManager")
	}
	roles := map[string]bool{}
	for _, r := range mgr.RoleList {
		roles[r.Name] = true
	}
	for i, fa := range list {
		if fa.User == "" || fa.Password == "" {
			return fmt.Errorf("accounts[%d]: user and password are required", i)
		}
		if fa.User == adminUser || restricted(fa.User) != nil {
			return fmt.Errorf("accounts[%d]: user %s is the simulator's own user or listed twice", i, fa.User)
		}
		if fa.Role.Name == "" {
			return fmt.Errorf("account %s: role.name is required", fa.User)
		}
		if roles[fa.Role.Name] {
			return fmt.Errorf("account %s: role %s exists already (a system role or another account's)", fa.User, fa.Role.Name)
		}
		roles[fa.Role.Name] = true
		body, ok := mgr.AddAuthorizationRole(&types.AddAuthorizationRole{Name: fa.Role.Name, PrivIds: fa.Role.Privileges}).(*methods.AddAuthorizationRoleBody)
		if !ok || body.Fault_ != nil {
			return fmt.Errorf("account %s: role %s: a privilege id that vCenter does not define (AddAuthorizationRole: InvalidArgument privIds) in %v",
				fa.User, fa.Role.Name, fa.Role.Privileges)
		}
		role := object.AuthorizationRoleList(mgr.RoleList).ByName(fa.Role.Name)
		a := &account{user: fa.User, password: fa.Password, role: fa.Role.Name,
			privileges: map[string]bool{}, on: map[types.ManagedObjectReference]bool{}}
		for _, p := range role.Privilege {
			a.privileges[p] = true
		}
		on := fa.On
		if len(on) == 0 {
			on = []string{"root"}
		}
		for _, name := range on {
			ref, err := namedEntity(reg, name)
			if err != nil {
				return fmt.Errorf("account %s: on: %v", fa.User, err)
			}
			a.on[ref] = true
			have := mgr.RetrieveEntityPermissions(ctx, &types.RetrieveEntityPermissions{Entity: ref}).(*methods.RetrieveEntityPermissionsBody)
			perms := append(have.Res.Returnval, types.Permission{Entity: &ref, Principal: fa.User, RoleId: role.RoleId, Propagate: true})
			mgr.SetEntityPermissions(&types.SetEntityPermissions{Entity: ref, Permission: perms})
		}
		accounts.mu.Lock()
		accounts.byUser[fa.User] = a
		accounts.mu.Unlock()
	}
	if len(list) > 0 {
		reg.SessionManager().ValidLogin = func(req *types.Login) bool {
			if a := restricted(req.UserName); a != nil {
				return req.Password == a.password
			}
			return req.UserName == adminUser && req.Password == adminPassword
		}
	}
	return nil
}

// rootFolder is the vCenter's root folder (ServiceContent.rootFolder).
func rootFolder(reg *simulator.Registry) types.ManagedObjectReference {
	si, _ := reg.Get(vim25.ServiceInstance).(*simulator.ServiceInstance)
	if si == nil {
		return types.ManagedObjectReference{Type: "Folder", Value: "group-d1"}
	}
	return si.Content.RootFolder
}

// namedEntity resolves an account's on entry: root, or a datacenter, cluster
// or host of the fleet by name (a name two of them share is refused).
func namedEntity(reg *simulator.Registry, name string) (types.ManagedObjectReference, error) {
	if name == "root" {
		return rootFolder(reg), nil
	}
	var found []types.ManagedObjectReference
	for _, kind := range []string{"Datacenter", "ClusterComputeResource", "HostSystem"} {
		for _, obj := range reg.All(kind) {
			if e, ok := obj.(mo.Entity); ok && e.Entity().Name == name {
				found = append(found, obj.Reference())
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return types.ManagedObjectReference{}, fmt.Errorf("%q is not root nor a datacenter, cluster or host of the fleet", name)
	}
	return types.ManagedObjectReference{}, fmt.Errorf("%q names more than one object (%v)", name, found)
}

// holds tells whether the account holds a privilege on an entity: the role's
// privileges where a permission of the account is on the entity or on one of
// its parents (permissions propagate), none elsewhere.
func (a *account) holds(reg *simulator.Registry, ref types.ManagedObjectReference, priv string) bool {
	return a.covers(reg, ref) && a.privileges[priv]
}

func (a *account) covers(reg *simulator.Registry, ref types.ManagedObjectReference) bool {
	for depth := 0; depth < 64; depth++ {
		if a.on[ref] {
			return true
		}
		e, ok := reg.Get(ref).(mo.Entity)
		if !ok || e.Entity().Parent == nil {
			return false
		}
		ref = *e.Entity().Parent
	}
	return false
}

func (a *account) list(reg *simulator.Registry, ref types.ManagedObjectReference) []string {
	if !a.covers(reg, ref) {
		return nil
	}
	out := make([]string, 0, len(a.privileges))
	for p := range a.privileges {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// sessionUser is the user of a session key, "" when no session has the key.
func sessionUser(ctx *simulator.Context, key string) string {
	if ctx.Session != nil && ctx.Session.Key == key {
		return ctx.Session.UserName
	}
	sm := ctx.Map.SessionManager()
	view, ok := (&simulator.Session{Registry: simulator.NewRegistry(), Map: ctx.Map}).Get(sm.Reference()).(*simulator.SessionManager)
	if !ok {
		return ""
	}
	for _, s := range view.SessionList {
		if s.Key == key {
			return s.UserName
		}
	}
	return ""
}

// ---- privilege questions -----------------------------------------------------------------

// authzOps answers the AuthorizationManager's privilege questions from the
// accounts; for every other user it answers as vcsim does (everything granted).
type authzOps struct {
	Self types.ManagedObjectReference
	mgr  *simulator.AuthorizationManager
}

func (o *authzOps) Reference() types.ManagedObjectReference { return o.Self }

func availability(reg *simulator.Registry, user string, entities []types.ManagedObjectReference, ids []string) []types.EntityPrivilege {
	a := restricted(user)
	out := make([]types.EntityPrivilege, 0, len(entities))
	for _, e := range entities {
		item := types.EntityPrivilege{Entity: e}
		for _, id := range ids {
			item.PrivAvailability = append(item.PrivAvailability, types.PrivilegeAvailability{
				PrivId: id, IsGranted: a == nil || a.holds(reg, e, id)})
		}
		out = append(out, item)
	}
	return out
}

func (o *authzOps) HasPrivilegeOnEntities(ctx *simulator.Context, req *types.HasPrivilegeOnEntities) soap.HasFault {
	return &methods.HasPrivilegeOnEntitiesBody{Res: &types.HasPrivilegeOnEntitiesResponse{
		Returnval: availability(ctx.Map, sessionUser(ctx, req.SessionId), req.Entity, req.PrivId)}}
}

func (o *authzOps) HasPrivilegeOnEntity(ctx *simulator.Context, req *types.HasPrivilegeOnEntity) soap.HasFault {
	got := availability(ctx.Map, sessionUser(ctx, req.SessionId), []types.ManagedObjectReference{req.Entity}, req.PrivId)
	out := make([]bool, len(req.PrivId))
	for i, p := range got[0].PrivAvailability {
		out[i] = p.IsGranted
	}
	return &methods.HasPrivilegeOnEntityBody{Res: &types.HasPrivilegeOnEntityResponse{Returnval: out}}
}

func (o *authzOps) HasUserPrivilegeOnEntities(ctx *simulator.Context, req *types.HasUserPrivilegeOnEntities) soap.HasFault {
	return &methods.HasUserPrivilegeOnEntitiesBody{Res: &types.HasUserPrivilegeOnEntitiesResponse{
		Returnval: availability(ctx.Map, req.UserName, req.Entities, req.PrivId)}}
}

func (o *authzOps) FetchUserPrivilegeOnEntities(ctx *simulator.Context, req *types.FetchUserPrivilegeOnEntities) soap.HasFault {
	a := restricted(req.UserName)
	if a == nil {
		return o.mgr.FetchUserPrivilegeOnEntities(req)
	}
	out := make([]types.UserPrivilegeResult, 0, len(req.Entities))
	for _, e := range req.Entities {
		out = append(out, types.UserPrivilegeResult{Entity: e, Privileges: a.list(ctx.Map, e)})
	}
	return &methods.FetchUserPrivilegeOnEntitiesBody{Res: &types.FetchUserPrivilegeOnEntitiesResponse{Returnval: out}}
}

// ---- refusals ----------------------------------------------------------------------------

// hostOwned is a host-level manager of this simulator (graphics, kernel
// modules, patches, services): its privileges are checked on its host.
type hostOwned interface{ ownerHost() *gpuHost }

func (m *GraphicsManager) ownerHost() *gpuHost    { return m.host }
func (m *KernelModuleSystem) ownerHost() *gpuHost { return m.host }
func (m *PatchManager) ownerHost() *gpuHost       { return m.host }
func (m *ImageConfigManager) ownerHost() *gpuHost { return m.host }
func (m *ServiceSystem) ownerHost() *gpuHost      { return m.host }

// privilegedCall is the privilege a state-changing call needs and the object
// it is checked on: the call's target (this), the host that owns the target
// manager (host), the root folder (root) or the call's entity argument (entity).
type privilegedCall struct {
	privilege string
	on        string
}

// privilegedCalls: "Required privileges" of each method in the vSphere Web
// Services API reference (README.md, "Accounts and privileges").
var privilegedCalls = map[string]privilegedCall{
	"EnterMaintenanceMode_Task":       {"Host.Config.Maintenance", "this"},
	"ExitMaintenanceMode_Task":        {"Host.Config.Maintenance", "this"},
	"RebootHost_Task":                 {"Host.Config.Maintenance", "this"},
	"ShutdownHost_Task":               {"Host.Config.Maintenance", "this"},
	"InstallHostPatchV2_Task":         {"Host.Config.Patch", "host"},
	"UpdateGraphicsConfig":            {"Host.Config.Settings", "host"},
	"UpdateModuleOptionString":        {"Host.Config.Settings", "host"},
	"StartService":                    {"Host.Config.NetService", "host"},
	"StopService":                     {"Host.Config.NetService", "host"},
	"RestartService":                  {"Host.Config.NetService", "host"},
	"UpdateServicePolicy":             {"Host.Config.NetService", "host"},
	"ReconfigureComputeResource_Task": {"Host.Inventory.EditCluster", "this"},
	"PowerOnVM_Task":                  {"VirtualMachine.Interact.PowerOn", "this"},
	"PowerOffVM_Task":                 {"VirtualMachine.Interact.PowerOff", "this"},
	"AddCustomFieldDef":               {"Global.ManageCustomFields", "root"},
	"RemoveCustomFieldDef":            {"Global.ManageCustomFields", "root"},
	"RenameCustomFieldDef":            {"Global.ManageCustomFields", "root"},
	"SetField":                        {"Global.SetCustomField", "entity"},
}

// refusal is the NoPermission fault for a call the session's account may not
// make, or nil (no account, a call not in privilegedCalls, the privilege held).
func refusal(ctx *simulator.Context, m *simulator.Method) types.BaseMethodFault {
	if ctx.Session == nil {
		return nil
	}
	a := restricted(ctx.Session.UserName)
	if a == nil {
		return nil
	}
	call, ok := privilegedCalls[m.Name]
	if !ok {
		return nil
	}
	target := m.This
	switch call.on {
	case "host":
		owned, ok := ctx.Map.Get(m.This).(hostOwned)
		if !ok {
			return nil
		}
		target = owned.ownerHost().ref
	case "root":
		target = rootFolder(ctx.Map)
	case "entity":
		if req, ok := m.Body.(*types.SetField); ok {
			target = req.Entity
		}
	}
	if a.holds(ctx.Map, target, call.privilege) {
		return nil
	}
	return noPermission(target, call.privilege)
}

func noPermission(target types.ManagedObjectReference, privilege string) types.BaseMethodFault {
	ref := target
	return simFault(&types.NoPermission{Object: &ref, PrivilegeId: privilege},
		"Permission to perform this operation was denied. Required privilege '%s' on managed object with id '%s'.",
		privilege, target.Value)
}

// restRefusal answers 403 UNAUTHORIZED (com.vmware.vapi.std.errors.Unauthorized)
// when the REST session's account lacks the privilege on the object; true
// when it answered.
func restRefusal(w http.ResponseWriter, r *http.Request, reg *simulator.Registry, target types.ManagedObjectReference, privilege string) bool {
	wire.mu.Lock()
	key := wire.restBound[restSessionID(r)]
	wire.mu.Unlock()
	if key == "" {
		return false
	}
	a := restricted(sessionUser(&simulator.Context{Context: r.Context(), Map: reg}, key))
	if a == nil || a.holds(reg, target, privilege) {
		return false
	}
	writeJSON(w, http.StatusForbidden, map[string]any{
		"error_type": "UNAUTHORIZED",
		"messages": []map[string]any{{"id": "vapi.security.authorization.invalid", "args": []string{},
			"default_message": fmt.Sprintf("Unable to authorize user: the operation needs privilege '%s' on %s %s.",
				privilege, target.Type, target.Value)}},
	})
	return true
}
