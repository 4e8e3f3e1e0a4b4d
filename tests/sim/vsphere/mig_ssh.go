package main

// Host MIG mode and the host's SSH shell, where nvidia-smi reads and sets it
// (the vSphere API has no call for host MIG mode).
//
// With -ssh-authorized-keys, every GPU host gets an SSH listener of its own
// on 127.0.0.1 (GET /_sim/ssh lists them) that accepts the public keys of
// that file and answers these commands, as nvidia-smi on ESXi does:
//
//	nvidia-smi --query-gpu=index,pci.bus_id,mig.mode.current,mig.mode.pending --format=csv,noheader
//	nvidia-smi [-i <index>] -mig 0|1
//
// MIG mode per GPU, as the driver handles it:
//   - A GPU without MIG (L40S) answers "[N/A]" and refuses -mig (exit 3).
//   - A GPU that holds vGPUs of powered-on VMs is in use: -mig only sets the
//     pending mode ("pending enable"); the current one follows at the next
//     host reboot.
//   - An idle Hopper GPU (H100, H200) changes at once; an Ampere GPU (A100)
//     always waits for a reboot (ESXi cannot reset it alone).
//
// MIG mode starts as the fleet's mig key says (default: disabled on every
// GPU). The listener refuses connections while the host's TSM-SSH service is
// stopped, and in lockdown mode authenticates only the users on the host's
// exception list (services.go). The host fault op
// nvidia_smi makes the next nvidia-smi -mig on that host fail (exit 1, the
// fault's message on stderr, nothing changed); reads are not affected. Other commands answer "not found" (exit 127).

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/simulator"
	"golang.org/x/crypto/ssh"
)

// gpuMig is one GPU's MIG mode: what runs now and what the next reset loads.
type gpuMig struct {
	Current bool `json:"current"`
	Pending bool `json:"pending"`
}

// sshAddrs: host name -> listener address. Guarded by sim.mu.
var (
	// sshAuthorizedKeys is the -ssh-authorized-keys flag ("": no SSH).
	sshAuthorizedKeys string

	sshAddrs = map[string]string{}
)

// migOf returns the host's MIG modes (gpuHost.mig, the one record of them;
// the fleet's mig key sets them at start). Call with sim.mu held.
func migOf(g *gpuHost) []gpuMig {
	g.ensureGPUState()
	return g.mig
}

// migAtBoot loads the pending MIG mode of every GPU (a host reboot resets them).
// Call with sim.mu held.
func migAtBoot(g *gpuHost) {
	m := migOf(g)
	for i := range m {
		m[i].Current = m[i].Pending
	}
}

// migSupported: the GPU model offers MIG-backed profiles.
func migSupported(g *gpuHost) bool {
	return g.spec.Model != nil && len(g.spec.Model.MIG) > 0
}

// migNeedsReboot: Ampere GPUs on ESXi take a new MIG mode only at a host reboot.
func migNeedsReboot(g *gpuHost) bool {
	return g.spec.Model != nil && strings.HasPrefix(g.spec.Model.Name, "A100")
}

// smiBusID is a GPU's PCI address as nvidia-smi prints it.
func smiBusID(i int) string { return fmt.Sprintf("00000000:%02X:00.0", gpuBus(i)) }

func enabledWord(b bool) string {
	if b {
		return "Enabled"
	}
	return "Disabled"
}

// nvidiaSMI runs one command line on host g: (stdout, stderr, exit status).
func nvidiaSMI(reg *simulator.Registry, g *gpuHost, line string) (string, string, int) {
	args := strings.Fields(line)
	if len(args) == 0 || args[0] != "nvidia-smi" {
		name := line
		if len(args) > 0 {
			name = args[0]
		}
		return "", fmt.Sprintf("sh: %s: not found\n", name), 127
	}
	sim.mu.Lock()
	running, rebooting := g.running, g.rebooting
	sim.mu.Unlock()
	if g.spec.GPUCount == 0 || running == "" || rebooting {
		return "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", 9
	}
	rest := args[1:]
	if len(rest) == 2 && strings.HasPrefix(rest[0], "--query-gpu=") && rest[1] == "--format=csv,noheader" {
		return migQuery(g, strings.Split(strings.TrimPrefix(rest[0], "--query-gpu="), ","))
	}
	index := -1
	if len(rest) == 4 && rest[0] == "-i" {
		n, err := strconv.Atoi(rest[1])
		if err != nil || n < 0 || n >= g.spec.GPUCount {
			return "", fmt.Sprintf("No devices were found (index %s)\n", rest[1]), 6
		}
		index, rest = n, rest[2:]
	}
	if len(rest) == 2 && rest[0] == "-mig" && (rest[1] == "0" || rest[1] == "1") {
		if msg, ok := sim.takeFault(g.spec.Name, "nvidia_smi"); ok {
			if msg == "" {
				msg = "Unable to enable MIG Mode: Unknown Error"
			}
			return "", msg + "\n", 1
		}
		return setMig(reg, g, index, rest[1] == "1")
	}
	return "", "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", 2
}

func migQuery(g *gpuHost, fields []string) (string, string, int) {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	m := migOf(g)
	var b strings.Builder
	for i := range m {
		var cols []string
		for _, f := range fields {
			switch f {
			case "index":
				cols = append(cols, strconv.Itoa(i))
			case "pci.bus_id":
				cols = append(cols, smiBusID(i))
			case "name":
				cols = append(cols, g.spec.Model.DisplayName)
			case "mig.mode.current", "mig.mode.pending":
				switch {
				case !migSupported(g):
					cols = append(cols, "[N/A]")
				case f == "mig.mode.current":
					cols = append(cols, enabledWord(m[i].Current))
				default:
					cols = append(cols, enabledWord(m[i].Pending))
				}
			default:
				return "", fmt.Sprintf("Field \"%s\" is not a valid field to query.\n", f), 2
			}
		}
		b.WriteString(strings.Join(cols, ", ") + "\n")
	}
	return b.String(), "", 0
}

// setMig sets the MIG mode of one GPU (index >= 0) or of all. A GPU that
// carries a powered-on VM's vGPU (the stored placement) only takes the
// pending mode.
func setMig(reg *simulator.Registry, g *gpuHost, index int, enable bool) (string, string, int) {
	ctx := &simulator.Context{Context: context.Background(), Map: reg}
	defer sim.render(ctx, g) // graphicsInfo.vgpuMode follows the current mode
	sim.mu.Lock()
	defer sim.mu.Unlock()
	m := migOf(g)
	verb := map[bool]string{true: "enable", false: "disable"}[enable]
	var out, errs strings.Builder
	code := 0
	for i := range m {
		if index >= 0 && i != index {
			continue
		}
		if !migSupported(g) {
			fmt.Fprintf(&errs, "Unable to %s MIG Mode for GPU %s: Not Supported\n", verb, smiBusID(i))
			code = 3
			continue
		}
		m[i].Pending = enable
		switch {
		case g.busy(i):
			fmt.Fprintf(&out, "Warning: MIG mode is in pending %s state for GPU %s:In use by another client\n"+
				"%s is currently being used by one or more other processes (e.g. CUDA application or a monitoring "+
				"application such as another instance of nvidia-smi). Please first kill all processes using the device "+
				"and retry the command or reboot the system to make MIG mode effective.\n", verb, smiBusID(i), smiBusID(i))
		case migNeedsReboot(g):
			fmt.Fprintf(&out, "Warning: MIG mode is in pending %s state for GPU %s:Not Supported\n"+
				"Reboot the system or try nvidia-smi --gpu-reset to make MIG mode effective on GPU %s\n", verb, smiBusID(i), smiBusID(i))
		default:
			m[i].Current = enable
			fmt.Fprintf(&out, "%sd MIG Mode for GPU %s\n", map[bool]string{true: "Enable", false: "Disable"}[enable], smiBusID(i))
		}
	}
	if code == 0 {
		out.WriteString("All done.\n")
	}
	return out.String(), errs.String(), code
}

// migView is the host's MIG modes for GET /_sim/hosts/<name>/mig (nil without MIG).
func migView(g *gpuHost) []map[string]any {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if !migSupported(g) {
		return nil
	}
	var out []map[string]any
	for i, m := range migOf(g) {
		out = append(out, map[string]any{"index": i, "pci_bus_id": smiBusID(i), "current": m.Current, "pending": m.Pending})
	}
	return out
}

// startSSH starts one SSH listener per GPU host, accepting the keys of
// authorizedKeys (an authorized_keys file).
func startSSH(reg *simulator.Registry, authorizedKeys string) error {
	data, err := os.ReadFile(authorizedKeys)
	if err != nil {
		return err
	}
	allowed := map[string]bool{}
	for len(data) > 0 {
		key, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			break
		}
		allowed[string(key.Marshal())] = true
		data = rest
	}
	if len(allowed) == 0 {
		return fmt.Errorf("%s holds no public key", authorizedKeys)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return err
	}
	sim.mu.Lock()
	var hosts []*gpuHost
	for _, g := range sim.hosts {
		if g.spec.GPUCount > 0 {
			hosts = append(hosts, g)
		}
	}
	sim.mu.Unlock()
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].spec.Name < hosts[j].spec.Name })
	for _, g := range hosts {
		cfg := &ssh.ServerConfig{
			PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
				if err := sshAdmits(g, meta.User()); err != nil {
					log.Printf("vspheresim: ssh %s: user %s refused: %v", g.spec.Name, meta.User(), err)
					return nil, err
				}
				if allowed[string(key.Marshal())] {
					return nil, nil
				}
				return nil, fmt.Errorf("public key not authorized")
			},
		}
		cfg.AddHostKey(signer)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		sim.mu.Lock()
		sshAddrs[g.spec.Name] = ln.Addr().String()
		sim.mu.Unlock()
		go serveSSH(reg, g, ln, cfg)
	}
	return nil
}

func serveSSH(reg *simulator.Registry, g *gpuHost, ln net.Listener, cfg *ssh.ServerConfig) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		if !sshServiceRunning(g) {
			// TSM-SSH stopped: nothing listens on port 22 of a real host; the
			// simulator's listener closes the connection before the handshake.
			log.Printf("vspheresim: ssh %s: connection refused, the TSM-SSH service is stopped", g.spec.Name)
			_ = conn.Close()
			continue
		}
		go func() {
			_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
			if err != nil {
				_ = conn.Close()
				return
			}
			go ssh.DiscardRequests(reqs)
			for nc := range chans {
				if nc.ChannelType() != "session" {
					_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
					continue
				}
				ch, creqs, err := nc.Accept()
				if err != nil {
					continue
				}
				go serveSession(reg, g, ch, creqs)
			}
		}()
	}
}

// serveSession answers one session: a pty or environment is granted, one
// exec runs a command; a login shell is refused.
func serveSession(reg *simulator.Registry, g *gpuHost, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "pty-req", "env":
			_ = req.Reply(true, nil)
		case "exec":
			if len(req.Payload) < 4 {
				_ = req.Reply(false, nil)
				continue
			}
			n := int(binary.BigEndian.Uint32(req.Payload))
			if n > len(req.Payload)-4 {
				_ = req.Reply(false, nil)
				continue
			}
			line := string(req.Payload[4 : 4+n])
			_ = req.Reply(true, nil)
			stdout, stderr, code := nvidiaSMI(reg, g, strings.TrimSpace(line))
			log.Printf("vspheresim: ssh %s: %s -> %d", g.spec.Name, line, code)
			_, _ = ch.Write([]byte(stdout))
			_, _ = ch.Stderr().Write([]byte(stderr))
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, uint32(code))
			_, _ = ch.SendRequest("exit-status", false, status)
			return
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// sshView is GET /_sim/ssh: host name -> "127.0.0.1:<port>".
func sshView() map[string]string {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	out := map[string]string{}
	for k, v := range sshAddrs {
		out[k] = v
	}
	return out
}
