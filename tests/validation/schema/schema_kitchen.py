"""Generated configurations that use many keywords of every section kind, written from the
HAProxy configuration manual rather than from the schema's own examples.

The example harness proves what the catalog *claims*; these configurations probe what it does
*not* know: argument forms, option combinations and keywords a template author would write.
Each section kind gets one configuration (with the few sections it needs around it), and
lines that only newer versions accept are tagged with the oldest family that has them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from controller.validation.schema.catalog import version_key

Line = str | tuple[str, str]
"""A directive, or ``(oldest family, directive)``."""

#: Sections every configuration starts with: what the lines below refer to.
_BASE = """\
global
    expose-experimental-directives
    master-worker
    localpeer lb1
defaults base
    mode http
    timeout connect 1s
    timeout client 1s
    timeout server 1s
backend be_base
    server base 127.0.0.1:8081
    stick-table type ip size 1k store gpc0,http_req_rate(10s)
"""

KINDS: dict[str, list[Line]] = {
    "global": [
        "maxconn 4096",
        "max-spread-checks 2s",
        "max-spread-checks 500",
        "spread-checks 5",
        "hard-stop-after 30s",
        "close-spread-time 5s",
        "nbthread 2",
        "cpu-map auto:1/1-2 0-1",
        "log 127.0.0.1:514 local0 info",
        "log 127.0.0.1:514 len 2048 format rfc5424 local1 notice",
        "log-tag haproxy",
        "log-send-hostname lb1",
        "stats socket ipv4@127.0.0.1:19999 level admin expose-fd listeners",
        "stats timeout 30s",
        "stats maxconn 10",
        "tune.bufsize 16384",
        "tune.maxrewrite 1024",
        "tune.http.maxhdr 101",
        "tune.ssl.default-dh-param 2048",
        "tune.ssl.cachesize 20000",
        "tune.ssl.lifetime 300",
        "tune.h2.max-concurrent-streams 100",
        "tune.idletimer 1000",
        "tune.rcvbuf.client 65536",
        "tune.vars.txn-max-size 1024",
        "ssl-default-bind-ciphers ECDHE+AESGCM:ECDHE+CHACHA20",
        "ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384",
        "ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets",
        "ssl-default-server-options ssl-min-ver TLSv1.2",
        "ssl-server-verify none",
        "ca-base certs",
        "crt-base certs",
        "server-state-base /tmp",
        "unix-bind mode 600",
        "maxsslconn 1000",
        "maxconnrate 1000",
        "maxcomprate 1000",
        "h1-case-adjust content-length Content-Length",
        "busy-polling",
        "no busy-polling",
        "strict-limits",
        "set-dumpable",
        "httpclient.resolvers.prefer ipv4",
        "httpclient.ssl.verify none",
        "numa-cpu-mapping",
        "profiling.tasks auto",
        "grace 1s",
        "mworker-max-reloads 3",
        "default log 127.0.0.1:514 local0 info",
        ("2.8", "quick-exit"),
        ("2.8", "no-quic"),
        ("2.8", "tune.h2.fe.max-concurrent-streams 100"),
        ("2.8", "tune.listener.default-shards by-group"),
        ("2.8", "httpclient.retries 3"),
        ("2.8", "httpclient.timeout.connect 5s"),
        ("2.8", "harden.reject-privileged-ports.tcp on"),
    ],
    "defaults": [
        "mode http",
        "log global",
        "option httplog",
        "option dontlognull",
        "option http-keep-alive",
        "option redispatch",
        "option abortonclose",
        "option forwardfor except 127.0.0.0/8",
        "option httpchk GET /healthz",
        "timeout connect 5s",
        "timeout client 30s",
        "timeout server 30s",
        "timeout http-request 10s",
        "timeout http-keep-alive 2s",
        "timeout queue 30s",
        "timeout tunnel 1h",
        "timeout client-fin 1s",
        "timeout server-fin 1s",
        "timeout check 2s",
        "timeout tarpit 1s",
        "retries 3",
        "retry-on all-retryable-errors",
        "maxconn 1000",
        "balance roundrobin",
        "default-server inter 3s fall 3 rise 2 weight 10",
        "errorfile 503 files/503.http",
        "http-reuse safe",
        "compression algo gzip",
        "compression type text/html text/plain",
        "backlog 1024",
        "fullconn 1000",
        "hash-type consistent sdbm avalanche",
        "unique-id-format %{+X}o\\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid",
        "unique-id-header X-Unique-ID",
        "max-keep-alive-queue 10",
        "http-check send meth GET uri /",
        "dynamic-cookie-key s3cr3t",
        "max-session-srv-conns 10",
        "stats show-modules",
        "load-server-state-from-file none",
        "clitcpka-idle 30s",
        "srvtcpka-cnt 3",
        "errorloc302 503 http://example.com/down",
        "default log 127.0.0.1:514 local0 info",
        ("2.8", "compression algo-req gzip"),
        ("2.8", "compression algo-res gzip"),
        ("2.8", "compression direction both"),
        ("2.8", "option forwarded proto host for"),
    ],
    "frontend": [
        "mode http",
        "bind 127.0.0.1:{port} name fe1 maxconn 100 backlog 512 defer-accept",
        "bind 127.0.0.1:{port} ssl crt certs/site.pem alpn h2,http/1.1 ssl-min-ver TLSv1.2",
        "bind 127.0.0.1:{port} accept-proxy",
        "tcp-request connection accept if { src 127.0.0.1 }",
        "tcp-request inspect-delay 5s",
        "tcp-request content accept if { src 127.0.0.1 }",
        "acl is_local src 127.0.0.1 10.0.0.0/8",
        "acl is_api path_beg /api",
        "acl host_www hdr(host) -i www.example.com",
        "http-request redirect scheme https code 301 if !{ ssl_fc }",
        "http-request deny deny_status 403 if { src 192.0.2.0/24 }",
        "http-request set-var(txn.host) req.hdr(host)",
        "http-request add-header X-Forwarded-Proto https if { ssl_fc }",
        "http-request del-header X-Debug",
        "http-request replace-header User-Agent (.*) agent-\\1",
        "http-request set-path /v2%[path] if is_api",
        "http-request track-sc0 src table be_base",
        "http-request capture req.hdr(host) len 64",
        "http-request return status 200 content-type text/plain string ok if { path /ping }",
        "http-response set-header X-Frame-Options DENY",
        "http-after-response add-header X-Served-By lb1",
        "use_backend %[req.hdr(host),lower,map(maps/hosts.map,be_base)]",
        "use_backend be_base if is_api",
        "default_backend be_base",
        "capture request header Host len 64",
        "capture response header Server len 32",
        "declare capture request len 32",
        "option http-buffer-request",
        "option socket-stats",
        "monitor-uri /health",
        "rate-limit sessions 100",
        "timeout client 30s",
        "timeout http-request 10s",
        "log-format %ci:%cp\\ [%tr]\\ %ft\\ %b/%s",
        "maxconn 2000",
        "errorfile 503 files/503.http",
        "http-error status 503 content-type text/plain string down",
        "filter compression",
        "compression algo gzip",
        "max-session-srv-conns 10",
        "stats show-modules",
        "acl bad_ua hdr_sub(user-agent) -i curl wget",
        "http-request deny if bad_ua !is_local",
        "http-request set-var-fmt(txn.p) %[path]",
        "http-request auth realm api if is_api !is_local",
        "http-request tarpit if { path /trap }",
        "http-request set-log-level debug if is_local",
        "http-request normalize-uri path-merge-slashes",
        "http-request wait-for-body time 1s at-least 1k",
        "http-request set-src hdr(x-forwarded-for) if is_local",
        "http-request set-header X-Request-ID %[unique-id]",
        "unique-id-format %[uuid]",
        "tcp-request session accept if { src 127.0.0.1 }",
        "use_backend be_base unless is_local",
    ],
    "backend": [
        "mode http",
        "balance url_param userid",
        "server s1 127.0.0.1:8080 check inter 2s fall 3 rise 2 weight 100 maxconn 50",
        "server s2 127.0.0.1:8443 ssl verify none sni str(example.com) check-ssl alpn h2",
        "server s3 127.0.0.1:8081 backup",
        "server s4 127.0.0.1:8082 send-proxy-v2 check agent-check agent-port 9999 agent-inter 5s",
        "server s5 127.0.0.1:8083 cookie s5 weight 0 disabled",
        "server-template srv 3 127.0.0.1:9000 check disabled",
        "cookie SRV insert indirect nocache dynamic",
        "dynamic-cookie-key s3cr3t",
        "option httpchk",
        "http-check connect",
        "http-check send meth GET uri /health ver HTTP/1.1 hdr Host example.com",
        "http-check expect status 200",
        "http-check expect rstatus ^2",
        "http-check send-state",
        "stick on req.cook(SRV)",
        "stick store-response res.cook(SRV)",
        "stick-table type string len 32 size 100k expire 30m store gpc0,http_req_rate(10s)",
        "http-response del-header Server",
        "http-request set-header X-Backend be",
        "retry-on conn-failure empty-response",
        "option redispatch",
        "option allbackups",
        "timeout server 30s",
        "timeout connect 5s",
        "fullconn 1000",
        "hash-balance-factor 150",
        "http-send-name-header X-Server",
        "use-server s1 if { hdr(x-s1) -m found }",
        "force-persist if { hdr(x-force) -m found }",
        "ignore-persist if { path_end .css }",
        "errorfiles myerrors",
        "use-fcgi-app php",
        "server fpm 127.0.0.1:9001 proto fcgi",
        "stats show-modules",
        "email-alert mailers mx",
        "email-alert from lb@example.com",
        "email-alert to ops@example.com",
        "email-alert level alert",
        "email-alert myhostname lb1",
        "option log-health-checks",
        "http-request cache-use ca",
        "http-response cache-store ca",
    ],
    "listen": [
        "mode http",
        "bind 127.0.0.1:{port}",
        "server s1 127.0.0.1:8080 check",
        "stats enable",
        "stats uri /stats",
        "stats refresh 10s",
        "stats auth admin:admin",
        "stats admin if TRUE",
        "stats show-legends",
        "stats show-node",
        "stats show-modules",
        "stats hide-version",
        "stats realm Haproxy",
        "stats scope .",
        "option tcp-check",
        "tcp-check connect",
        "tcp-check send PING\\r\\n",
        "tcp-check send-lf %[src]\\r\\n",
        "tcp-check send-binary-lf %[src,hex]",
        "tcp-check expect string +PONG",
        "tcp-check comment probe",
        "dynamic-cookie-key s3cr3t",
    ],
    "peers": [
        "peer lb1 127.0.0.1:10000",
        "table t1 type ip size 1k expire 30s",
        ("2.8", "shards 1"),
    ],
    "resolvers": [
        "nameserver dns1 127.0.0.1:53",
        "nameserver dns2 udp@127.0.0.1:5353",
        "accepted_payload_size 8192",
        "resolve_retries 3",
        "timeout resolve 1s",
        "timeout retry 1s",
        "hold valid 10s",
        "hold nx 30s",
        "hold other 30s",
        "hold refused 30s",
        "hold timeout 30s",
        "hold obsolete 30s",
    ],
    "userlist": [
        "group admins",
        "user alice insecure-password secret groups admins",
        "user bob insecure-password other",
    ],
    "cache": [
        "total-max-size 4",
        "max-object-size 10000",
        "max-age 60",
        "process-vary on",
        "max-secondary-entries 10",
    ],
    "ring": [
        "description a ring for logs",
        "format rfc5424",
        "maxlen 1200",
        "size 32764",
        "timeout connect 5s",
        "timeout server 10s",
        "server logsrv 127.0.0.1:6514",
    ],
    "http-errors": [
        "errorfile 503 files/503.http",
        "errorfile 404 files/503.http",
    ],
    "mailers": [
        "mailer smtp1 127.0.0.1:25",
        "mailer smtp2 127.0.0.1:2525",
        "timeout mail 10s",
    ],
    "program": [
        "command /bin/true",
        "option start-on-reload",
        "no option start-on-reload",
    ],
    "log-forward": [
        "dgram-bind 127.0.0.1:{port}",
        "bind 127.0.0.1:{port}",
        "log 127.0.0.1:514 local0",
        "backlog 10",
        "maxconn 10",
        "timeout client 10s",
    ],
    "fcgi-app": [
        "docroot /var/www",
        "index index.php",
        "path-info ^(/.+\\.php)(/.*)?$",
        "option keep-conn",
        "option mpxs-conns",
        "option max-reqs 10",
        "option get-values",
        "set-param REDIRECT_STATUS 200",
        "pass-header Authorization",
        "log-stderr global",
    ],
}

#: Sections that lines of another kind refer to.
_SUPPORT = """\
http-errors myerrors
    errorfile 503 files/503.http
fcgi-app php
    docroot /var/www
mailers mx
    mailer smtp 127.0.0.1:25
cache ca
    total-max-size 4
"""


@dataclass(frozen=True)
class Kitchen:
    kind: str
    text: str
    lines: dict[int, str]
    """Line number → the directive under test."""


def lines_for(kind: str, family: str) -> list[str]:
    out = []
    for item in KINDS[kind]:
        since, line = item if isinstance(item, tuple) else ("2.6", item)
        if version_key(family) >= version_key(since):
            out.append(line)
    return out


def kitchens(family: str) -> Iterator[Kitchen]:
    """One configuration per section kind for ``family``."""
    for kind in KINDS:
        text = _BASE + _SUPPORT
        port = 24000
        rows: dict[int, str] = {}
        body: list[str] = []
        header = "global" if kind == "global" else f"{kind} k_{kind.replace('-', '_')}"
        if kind == "global":
            # the global keywords join the first global section
            head, rest = text.split("defaults base\n", 1)
            offset = head.count("\n")
            for n, line in enumerate(lines_for(kind, family)):
                port += 1
                body.append("    " + line.replace("{port}", str(port)))
                rows[offset + n + 1] = line
            yield Kitchen(kind, head + "\n".join(body) + "\ndefaults base\n" + rest, rows)
            continue
        body.append(header)
        start = text.count("\n") + 1
        for n, line in enumerate(lines_for(kind, family)):
            port += 1
            body.append("    " + line.replace("{port}", str(port)))
            rows[start + n + 1] = line
        yield Kitchen(kind, text + "\n".join(body) + "\n", rows)
