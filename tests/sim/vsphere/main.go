// Command vspheresim is the project's vSphere simulator: govmomi's vcsim
// model of a vCenter (API 8.0.3.0, or 9.0.0.0 / 9.1.0.0 with -api-version 9.0 / 9.1) with its
// REST simulators, plus NVIDIA GPU hosts built from a fleet file (see README.md).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"

	// REST simulators: /rest and /api session, tagging, content library,
	// namespaces and VM classes, vLCM (esx settings), cluster modules.
	_ "github.com/vmware/govmomi/vapi/cluster/simulator"
	_ "github.com/vmware/govmomi/vapi/esx/settings/simulator"
	_ "github.com/vmware/govmomi/vapi/namespace/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
)

func main() {
	fleetPath := flag.String("fleet", "", "fleet file (YAML), see README.md")
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	stateDir := flag.String("state-dir", ".sim", "folder for the CA certificate")
	envFile := flag.String("env-file", "", "write VMWARE_* connection variables to this file")
	username := flag.String("username", "administrator@vsphere.local", "user name clients log in with")
	password := flag.String("password", "", "password (default: generated)")
	rebootSeconds := flag.Float64("reboot-seconds", 1, "how long a rebooting host stays notResponding")
	apiVersion := flag.String("api-version", envOr(apiVersionEnv, "8.0.3"), "vSphere API version to present: 8.0.3, 9.0 or 9.1 (default $"+apiVersionEnv+" or 8.0.3)")
	sshKeys := flag.String("ssh-authorized-keys", "", "serve SSH (nvidia-smi, host MIG mode) on one port per GPU host to these public keys (GET /_sim/ssh lists the ports)")
	restLogFile := flag.String("rest-log", os.Getenv(restLogEnv), "append every client REST request and its answer to this file (JSON lines; default $"+restLogEnv+")")
	flag.Parse()

	if err := openRestLog(*restLogFile); err != nil {
		log.Fatalf("vspheresim: %v", err)
	}

	release, err := lookupPresentation(*apiVersion)
	if err != nil {
		log.Fatalf("vspheresim: %v", err)
	}

	sshAuthorizedKeys = *sshKeys
	if err := run(*fleetPath, *listen, *stateDir, *envFile, *username, *password, *rebootSeconds, release); err != nil {
		log.Fatalf("vspheresim: %v", err)
	}
}

func run(fleetPath, listen, stateDir, envFile, username, password string, rebootSeconds float64, release presentation) error {
	if fleetPath == "" {
		return fmt.Errorf("-fleet is required")
	}
	fleet, err := loadFleet(fleetPath)
	if err != nil {
		return err
	}
	hosts, vms, err := fleet.expand()
	if err != nil {
		return err
	}
	if password == "" {
		b := make([]byte, 12)
		_, _ = rand.Read(b)
		password = hex.EncodeToString(b)
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	caFile, err := filepath.Abs(filepath.Join(stateDir, "vsphere-ca.pem"))
	if err != nil {
		return err
	}
	tlsConfig, err := newTLS(caFile)
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	sim.rebootDelay = time.Duration(rebootSeconds * float64(time.Second))

	// pyvmomi sends a managed object reference inside an anyType field (for
	// example ArrayUpdateSpec.removeKey when removing a DRS override) typed
	// xsi:type="ManagedObject"; govmomi does not know that name.
	types.Add("ManagedObject", reflect.TypeOf((*types.ManagedObjectReference)(nil)).Elem())

	// An empty vCenter: the fleet creates every datacenter, cluster and host.
	model := simulator.VPX()
	model.Datacenter, model.Cluster, model.ClusterHost, model.Host = 0, 0, 0, 0
	model.Datastore, model.Machine, model.Portgroup = 0, 0, 0
	usePresentation(model, release)
	if err := model.Create(); err != nil {
		return err
	}
	defer model.Remove()

	reg := model.Map()
	reg.Handler = dispatch
	reg.AddHandler(&taskMessages{Self: types.ManagedObjectReference{Type: "GpupoolTaskMessages", Value: "task-messages"}})
	reg.AddHandler(&newEntityFields{Self: types.ManagedObjectReference{Type: "GpupoolEntityFields", Value: "entity-fields"}})
	sim.reg = reg

	start := time.Now()
	if err := buildInventory(model, fleet, hosts, vms); err != nil {
		return err
	}

	if err := setupAccounts(reg, fleet.Accounts, username, password); err != nil {
		return err
	}

	if sshAuthorizedKeys != "" {
		if err := startSSH(reg, sshAuthorizedKeys); err != nil {
			return fmt.Errorf("ssh: %w", err)
		}
	}

	model.Service.Listen = &url.URL{Host: listen, User: url.UserPassword(username, password)}
	model.Service.TLS = tlsConfig
	model.Service.RegisterEndpoints = true
	server := model.Service.NewServer()
	defer server.Close()

	// Count requests and serve /_sim/: the server was started a moment ago
	// and nobody knows its port yet, so swapping the handler is safe here.
	stats := newCounters()
	server.Config.Handler = &front{next: server.Config.Handler, stats: stats, reg: reg, srv: server}

	_, port, _ := net.SplitHostPort(server.Listener.Addr().String())
	if envFile != "" {
		env := fmt.Sprintf("VMWARE_HOST=127.0.0.1\nVMWARE_PORT=%s\nVMWARE_USER=%s\nVMWARE_PASSWORD=%s\nVMWARE_CA_FILE=%s\nVMWARE_VALIDATE_CERTS=true\n",
			port, username, password, caFile)
		if err := os.WriteFile(envFile, []byte(env), 0o600); err != nil {
			return err
		}
	}
	p, _ := strconv.Atoi(port)
	log.Printf("vspheresim: %d hosts, %d VMs in %s, API %s, listening on port %d", len(hosts), len(vms), time.Since(start).Round(time.Millisecond), release.API, p)
	fmt.Printf("READY https://127.0.0.1:%s/sdk\n", port)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	log.Printf("vspheresim: stopping")
	return nil
}

// envOr is the environment variable's value, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
