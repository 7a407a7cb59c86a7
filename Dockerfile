# syntax=docker/dockerfile:1
# The karpenter-rs controller image: `karpenter controller` (the Helm chart passes
# --cloud-provider and the settings' environment variables).
#
#   docker build -t ghcr.io/karpenter-rs/karpenter:0.1.0 .        # or scripts/build-image
#
# Stage 1 builds the `dist` binary (fat LTO, one codegen unit, the symbol order) on Debian 12 (glibc 2.36); stage 2 is distroless
# cc-debian12 (glibc, libgcc, CA certificates; no shell, no package manager), running as the
# nonroot user 65532, the UID the chart's securityContext sets. The binary links rustls with
# ring (no OpenSSL) and embeds its data (the instance-type catalog), so nothing else is copied.

ARG RUST_VERSION=1.95

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
# Stamped into `karpenter --version` and the build_info metric (crates/karpenter-controller/build.rs).
ARG KARPENTER_BUILD_COMMIT=unknown
ENV KARPENTER_BUILD_COMMIT=${KARPENTER_BUILD_COMMIT} \
    CARGO_TERM_COLOR=never
COPY . .
# The registry and target caches stay in BuildKit's cache between builds; the binary is copied
# out of the cache mount so that it is part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p karpenter --bin karpenter \
 && install -D -m 0755 target/dist/karpenter /out/karpenter \
 && /out/karpenter --version

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/karpenter /karpenter
USER 65532:65532
# Metrics (METRICS_PORT) and health probes (HEALTH_PROBE_PORT), the chart's defaults.
EXPOSE 8080 8081
ENTRYPOINT ["/karpenter", "controller"]
