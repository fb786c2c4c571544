# agentd in a container: a multi-stage build (the Rust toolchain stays in the first stage), a small Debian runtime,
# a non-root user, the web console embedded in the binary.
#   docker build -t agentd .        (or: podman build -t agentd .)
#   docker compose up               (with PostgreSQL: see compose.yaml)

FROM docker.io/library/rust:1.95-slim-bookworm AS build
# make: jemalloc, the binary's allocator, is built from its C sources (tikv-jemalloc-sys).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that a change of the sources does not rebuild them: a manifest with empty targets.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src bench tests/api \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > bench/main.rs && echo 'fn main() {}' > bench/read_cost.rs \
    && echo 'fn main() {}' > tests/api/main.rs \
    && cargo build --release --locked --bin agentd \
    && rm -rf src bench tests
COPY src src
COPY migrations migrations
COPY web/dist web/dist
COPY bench bench
COPY tests/api/main.rs tests/api/main.rs
# touch: the sources are older than the placeholder build's outputs.
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin agentd \
    && install -m 0755 target/release/agentd /usr/local/bin/agentd

FROM docker.io/library/debian:bookworm-slim
# ca-certificates: TLS to chain nodes and LLM providers uses the system's roots. Not pinned: it must follow Debian's
# security updates of the trust store.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/agentd --create-home agentd
COPY --from=build /usr/local/bin/agentd /usr/local/bin/agentd
USER 10001:10001
WORKDIR /var/lib/agentd
# Inside a container the service must listen on all interfaces; publish the port only where it is meant to be
# reached (a TLS proxy in front; docs/operations.md).
ENV BIND_ADDR=0.0.0.0:8080 \
    DATABASE_URL=sqlite:///var/lib/agentd/agentd.db \
    DATA_DIR=/var/lib/agentd
VOLUME ["/var/lib/agentd"]
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/agentd"]
CMD ["serve"]
