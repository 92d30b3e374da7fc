// Command cluster is the project's test bed control plane: a real etcd, kube-apiserver and
// kube-controller-manager of one pinned Kubernetes release, on loopback, in one binary.
//
// The same binary is four programs, chosen by its first argument (or by its name, for kubectl):
//
//	cluster [flags]                 the supervisor: certificates, embedded etcd, the two children
//	cluster kube-apiserver ...      the real kube-apiserver command
//	cluster kube-controller-manager the real kube-controller-manager command
//	cluster kubectl ... / kubectl   the real kubectl of the same release
//
// The API server and the controller manager run as child processes because each installs its
// own process-wide signal handler (a second one in the same process panics), and in their own
// process groups so that a Ctrl-C reaches only the supervisor, which then stops them in order,
// stops etcd and removes the data directory exactly once, whatever signals follow.
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		runKubectl()
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "kubectl":
			os.Args = os.Args[1:]
			runKubectl()
		case "kube-apiserver":
			cmd := apiserver.NewAPIServerCommand()
			cmd.SetArgs(os.Args[2:])
			os.Exit(cli.Run(cmd))
		case "kube-controller-manager":
			cmd := controllermanager.NewControllerManagerCommand()
			cmd.SetArgs(os.Args[2:])
			os.Exit(cli.Run(cmd))
		}
	}
	if err := supervise(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func runKubectl() {
	command := kubectlcmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		kubectlutil.CheckErr(err)
	}
	os.Exit(0)
}

type options struct {
	dir          string
	keep         bool
	apply        multiFlag
	serviceCIDR  string
	controllers  string
	readyTimeout time.Duration
	verbose      bool
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func supervise() error {
	var o options
	flag.StringVar(&o.dir, "dir", "", "data directory (default: a new temporary directory); removed on exit")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory on exit")
	flag.Var(&o.apply, "apply", "manifest file or directory to apply server-side once ready (repeatable)")
	// Inside the test pod network's CIDR, whose `unreachable` route drops a packet to any
	// address no test pod holds: a ClusterIP can never send traffic off this machine.
	flag.StringVar(&o.serviceCIDR, "service-cidr", "10.244.240.0/20", "Service ClusterIP range")
	flag.StringVar(&o.controllers, "controllers",
		"namespace,garbagecollector,serviceaccount,serviceaccount-token,clusterrole-aggregation,root-ca-cert-publisher",
		"kube-controller-manager controllers to run; empty runs none")
	flag.DurationVar(&o.readyTimeout, "ready-timeout", 90*time.Second, "how long to wait for /readyz")
	flag.BoolVar(&o.verbose, "v", false, "copy the components' logs to stderr (default: files in the data directory)")
	flag.Parse()

	// From here on the first SIGINT/SIGTERM starts the shutdown and later ones are ignored:
	// `make` forwards a group signal to its recipe too, and a second signal must not cut the
	// cleanup short.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)

	if o.dir == "" {
		d, err := os.MkdirTemp("", "htc-cluster-")
		if err != nil {
			return err
		}
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	c := &cluster{dir: dir, opts: o}
	runErr := c.run(signals)
	c.stop()
	if !o.keep {
		if err := os.RemoveAll(dir); err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

type cluster struct {
	dir      string
	opts     options
	etcd     *embed.Etcd
	children []*child
	exited   chan *child
}

type child struct {
	name    string
	cmd     *exec.Cmd
	log     string
	err     error
	stopped bool // stopped on purpose (SIGUSR1): its exit is not a failure
}

func (c *cluster) path(name string) string { return filepath.Join(c.dir, name) }

func (c *cluster) run(signals <-chan os.Signal) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := c.writePKI(); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	kubeconfig := c.path("kubeconfig")
	if err := c.writeKubeconfig(kubeconfig, server); err != nil {
		return err
	}
	policy := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n"
	if err := os.WriteFile(c.path("audit-policy.yaml"), []byte(policy), 0o600); err != nil {
		return err
	}
	if err := c.startEtcd(etcdClient, etcdPeer); err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	// Tests reach etcd directly to produce faults the API cannot (a compaction, so that a
	// watch resuming from an old resourceVersion gets 410 Gone).
	if err := os.WriteFile(c.path("etcd-endpoint"), []byte(fmt.Sprintf("http://127.0.0.1:%d\n", etcdClient)), 0o600); err != nil {
		return err
	}
	c.exited = make(chan *child, 4)
	if err := c.spawn("kube-apiserver", c.apiserverArgs(etcdClient, apiPort)); err != nil {
		return err
	}
	if err := c.waitReady(server, signals); err != nil {
		return err
	}
	if c.opts.controllers != "" {
		if err := c.spawn("kube-controller-manager", c.controllerManagerArgs(kubeconfig)); err != nil {
			return err
		}
	}
	for _, manifest := range c.opts.apply {
		if err := c.kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", manifest); err != nil {
			return fmt.Errorf("apply %s: %w", manifest, err)
		}
	}
	if len(c.opts.apply) > 0 {
		if err := c.waitEstablished(kubeconfig); err != nil {
			return err
		}
	}
	fmt.Printf("export KUBECONFIG=%s\n", kubeconfig)
	// Fault injection for tests: SIGUSR1 stops the API server (etcd and its data stay),
	// SIGUSR2 starts it again on the same port.
	faults := make(chan os.Signal, 2)
	signal.Notify(faults, syscall.SIGUSR1, syscall.SIGUSR2)
	for {
		select {
		case <-signals:
			return nil
		case sig := <-faults:
			if sig == syscall.SIGUSR1 {
				c.stopAPIServer()
			} else if err := c.spawn("kube-apiserver", c.apiserverArgs(etcdClient, apiPort)); err != nil {
				return err
			}
		case ch := <-c.exited:
			if !ch.stopped {
				return fmt.Errorf("%s exited (%v); its log: %s", ch.name, ch.err, ch.log)
			}
		case err := <-c.etcd.Err():
			return fmt.Errorf("etcd failed: %w", err)
		}
	}
}

// stopAPIServer ends the running API server child, and waits for it to exit.
func (c *cluster) stopAPIServer() {
	for _, ch := range c.children {
		if ch.name != "kube-apiserver" || ch.stopped || ch.cmd.ProcessState != nil {
			continue
		}
		ch.stopped = true
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
		// A graceful stop waits for long-running watches; an outage need not be graceful.
		kill := time.AfterFunc(3*time.Second, func() { _ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL) })
		for ex := range c.exited {
			if ex == ch {
				break
			}
		}
		kill.Stop()
	}
}

// stop ends the children (newest first), then etcd; a child that ignores SIGTERM is killed.
func (c *cluster) stop() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	for i := len(c.children) - 1; i >= 0; i-- {
		ch := c.children[i]
		if ch.stopped || ch.cmd.ProcessState != nil {
			continue
		}
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
		deadline := time.After(15 * time.Second)
		for done := false; !done; {
			select {
			case ex := <-c.exited:
				done = ex == ch
			case <-deadline:
				_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
				<-c.exited
				done = true
			}
		}
	}
	if c.etcd != nil {
		c.etcd.Close()
	}
}

func (c *cluster) spawn(name string, args []string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := c.path(name + ".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if c.opts.verbose {
		cmd.Stderr = os.Stderr
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG=")
	// Own process group (a terminal's Ctrl-C reaches only the supervisor) and killed with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	ch := &child{name: name, cmd: cmd, log: logPath}
	c.children = append(c.children, ch)
	go func() {
		ch.err = cmd.Wait()
		logFile.Close()
		c.exited <- ch
	}()
	return nil
}

// waitEstablished waits for every CRD to be served. kubectl wait fails at once, instead of
// waiting, when it reads a CRD whose status.conditions the API server has not filled yet
// (null right after the apply, on a loaded machine); that is retried, a few times.
func (c *cluster) waitEstablished(kubeconfig string) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Second)
		}
		err = c.kubectl(kubeconfig, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
		if err == nil {
			return nil
		}
	}
	return err
}

func (c *cluster) kubectl(kubeconfig string, args ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

func (c *cluster) apiserverArgs(etcdPort, apiPort int) []string {
	return []string{
		"--etcd-servers=" + fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir=" + c.path("apiserver-certs"),
		"--tls-cert-file=" + c.path("serving.crt"),
		"--tls-private-key-file=" + c.path("serving.key"),
		"--client-ca-file=" + c.path("ca.crt"),
		"--authorization-mode=Node,RBAC",
		// Added to the default chain, which already holds them; named here because the
		// project's tests rely on each.
		"--enable-admission-plugins=NamespaceLifecycle,ServiceAccount,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy,MutatingAdmissionWebhook",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.path("sa.pub"),
		"--service-account-signing-key-file=" + c.path("sa.key"),
		"--service-cluster-ip-range=" + c.opts.serviceCIDR,
		// The `kubernetes` Service's endpoint would be 127.0.0.1, which the server refuses.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		// Every request at Metadata level (who, verb, resource, code): tests compare the API
		// calls a component really makes with the RBAC rules it ships.
		"--audit-policy-file=" + c.path("audit-policy.yaml"),
		"--audit-log-path=" + c.path("audit.log"),
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
	}
}

func (c *cluster) controllerManagerArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + c.opts.controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + c.path("sa.key"),
		"--root-ca-file=" + c.path("ca.crt"),
		"--cluster-signing-duration=0s",
		"--concurrent-gc-syncs=5",
		"--namespace-sync-period=10s",
	}
}

func (c *cluster) startEtcd(clientPort, peerPort int) error {
	cfg := embed.NewConfig()
	cfg.Name = "htc"
	cfg.Dir = c.path("etcd")
	clientURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", clientPort)}
	peerURL := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{c.path("etcd.log")}
	// A throwaway store: durability buys nothing and fsync costs seconds over a test run.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	c.etcd = e
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("not ready after 30s")
	}
}

func (c *cluster) waitReady(server string, signals <-chan os.Signal) error {
	pair, err := tls.LoadX509KeyPair(c.path("admin.crt"), c.path("admin.key"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(c.path("ca.crt"))
	if err != nil {
		return err
	}
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}},
	}
	deadline := time.Now().Add(c.opts.readyTimeout)
	for time.Now().Before(deadline) {
		resp, err := client.Get(server + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-signals:
			return errors.New("interrupted before the API server was ready")
		case ch := <-c.exited:
			return fmt.Errorf("%s exited before ready (%v); its log: %s\n%s", ch.name, ch.err, ch.log, tail(ch.log, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("kube-apiserver not ready after %s; its log: %s\n%s", c.opts.readyTimeout, c.path("kube-apiserver.log"), tail(c.path("kube-apiserver.log"), 30))
}

func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// --- certificates -------------------------------------------------------------------------

func (c *cluster) writePKI() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "htc-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writeCert(c.path("ca.crt"), caDER, caKey, ""); err != nil {
		return err
	}
	_, firstServiceIP, err := net.ParseCIDR(c.opts.serviceCIDR)
	if err != nil {
		return fmt.Errorf("--service-cidr: %w", err)
	}
	firstServiceIP.IP[len(firstServiceIP.IP)-1]++
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), firstServiceIP.IP},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := c.issue("serving", serving, ca, caKey); err != nil {
		return err
	}
	admin := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "htc-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := c.issue("admin", admin, ca, caKey); err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(c.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	return writePEM(c.path("sa.pub"), "PUBLIC KEY", pub)
}

func (c *cluster) issue(name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	return writeCert(c.path(name+".crt"), der, key, c.path(name+".key"))
}

func writeCert(certPath string, der []byte, key *ecdsa.PrivateKey, keyPath string) error {
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	if keyPath == "" {
		return nil
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

func (c *cluster) writeKubeconfig(path, server string) error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(c.path(name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	cert, err := read("admin.crt")
	if err != nil {
		return err
	}
	key, err := read("admin.key")
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: htc
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: htc-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: htc
  context:
    cluster: htc
    user: htc-admin
    namespace: default
current-context: htc
`, server, ca, cert, key)
	return os.WriteFile(path, []byte(body), 0o600)
}
