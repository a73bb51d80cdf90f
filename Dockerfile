# One image for both roles: `captf run` (the controller Deployment) and
# `captf runner` (the Jobs it creates). Build from the repository root:
#   docker build -t captf:dev .
# A release is built from its tag's checkout and tagged with it
# (ghcr.io/captf-io/captf:vX.Y.Z); each release directory under clusterctl/ carries this
# file. The base images are pinned by digest (the multi-platform index of the tag named
# beside it), so a rebuild of a release starts from the same bytes; moving a pin is a
# change of its own.

# OpenTofu and the `local` provider, built from the Go modules pinned in
# hack/tofu (the same build as for development: nothing is downloaded at run
# time, and `tofu init` finds hashicorp/local in the filesystem mirror).
FROM golang:1.26-bookworm@sha256:551752d3ad9de9923190bf5280500617ed8fee287ffb4b0220e770ef89346258 AS tofu
WORKDIR /src/hack/tofu
COPY hack/progress.sh ../progress.sh
COPY hack/tofu/ ./
RUN CAPTF_CACHE_DIR=/build ./build.sh > /build-dir \
 && mkdir -p /opt \
 && cp -a "$(tail -n 1 /build-dir)" /opt/tofu \
 && ./write-tofurc.sh /opt/tofu/mirror > /opt/tofu/tofurc \
 && TF_CLI_CONFIG_FILE=/opt/tofu/tofurc /opt/tofu/tofu version

# captf-copy, the static copier a module image Job's copy shape runs from the module
# image (controller/runner/copier.py puts it into the pod's shared emptyDir).
FROM golang:1.26-bookworm@sha256:551752d3ad9de9923190bf5280500617ed8fee287ffb4b0220e770ef89346258 AS copier
WORKDIR /src/hack/copier
COPY hack/copier/go.mod hack/copier/main.go ./
RUN CGO_ENABLED=0 go build -buildvcs=false -trimpath -ldflags "-s -w" -o /out/captf-copy .

# The captf package and its dependencies, installed into a prefix to copy.
FROM python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b AS python
WORKDIR /src
COPY pyproject.toml ./
COPY runtime/ runtime/
COPY controller/ controller/
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b
COPY --from=python /install /usr/local
COPY --from=tofu /opt/tofu /opt/tofu
COPY --from=copier /out/captf-copy /usr/local/bin/captf-copy
# The runner reads these (contract: docs/runner.md); the controller ignores them.
ENV CAPTF_TOFU=/opt/tofu/tofu \
    CAPTF_TOFU_CLI_CONFIG=/opt/tofu/tofurc \
    CAPTF_COPIER=/usr/local/bin/captf-copy \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A fixed non-root uid, so pod securityContexts can name it (runAsNonRoot).
RUN useradd --uid 65532 --user-group --no-create-home --home-dir /tmp captf
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["captf"]
CMD ["run"]
