# syntax=docker/dockerfile:1
# One image for every Ferrum process: `all-in-one` (the default command), `api`, `conductor`
# and `db-sync`, chosen by the command (docker-compose.yml runs them all from this image).
#
#   docker build -t ferrum .
#   docker run --rm -p 127.0.0.1:6385:6385 ferrum            # all-in-one, SQLite in /var/lib/ferrum

# Build: a Rust toolchain is all it takes (SQLite is compiled in). The registry and the target
# directory are cache mounts, so a rebuild after a source change recompiles Ferrum, not its
# dependencies. The binary is copied out of the cache mount, which is not part of the layer.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin ferrum \
    && cp target/release/ferrum /usr/local/bin/ferrum

# Run: Debian slim, the binary, and qemu-img for conductors that convert images
# (image_download_source = local). No system SQLite or TLS library is needed.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends qemu-utils \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/ferrum ferrum
COPY --from=build /usr/local/bin/ferrum /usr/local/bin/ferrum
USER ferrum
WORKDIR /var/lib/ferrum
# Inside a container the API must listen beyond loopback to be reached through a published port.
ENV FERRUM_API_BIND=0.0.0.0:6385
EXPOSE 6385
ENTRYPOINT ["ferrum"]
CMD ["all-in-one"]
