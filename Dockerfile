# Dockerfile -- one image for every process of the cluster in docker-compose.yml:
# a control-plane replica runs `node dist/control-plane.mjs`, a node agent
# `node dist/node-agent.mjs` (single-file esbuild bundles: no tsx loader at run
# time, which would cost each process ~30 MB).
#
#   npm ci                        # on the host, first: the build uses this node_modules
#   docker compose build          # or: docker build --build-arg NODE_IMAGE=node:22-slim .
#
# Why node_modules comes from the build context: image builds may run without
# network (CI here does), so the build must not need the npm registry. If the
# host's node_modules cannot run on the image's platform (say it was installed
# on macOS, so esbuild's native binary is the wrong one), the build falls back
# to `npm ci` inside the image, which then needs network.

ARG NODE_IMAGE=node:20-slim

# ---- build: bundle the two process entry points into dist/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY . .
RUN if node -e "require('esbuild').transformSync('let x: number = 1', { loader: 'ts' })" >/dev/null 2>&1; then \
      echo "using node_modules from the build context"; \
    else \
      echo "node_modules missing or built for another platform: running npm ci (needs network)"; \
      rm -rf node_modules && npm ci --no-audit --no-fund; \
    fi \
 && npm run build \
 && mkdir -p dist/node_modules \
 && (cp -r node_modules/ffi-rs node_modules/@yuuang dist/node_modules/ 2>/dev/null \
     || echo "ffi-rs is not in node_modules: replicas will not trim malloc at rest")

# ---- run: node, util-linux (setpriv) and the two bundles ----
FROM ${NODE_IMAGE}
# setpriv gives every unit a parent-death signal, so units die with their
# agent even when the agent is SIGKILLed (`docker compose kill node-b`).
# Debian slim images have it (util-linux is essential); install it if not.
RUN command -v setpriv >/dev/null 2>&1 \
 || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends util-linux \
     && rm -rf /var/lib/apt/lists/*) \
 && command -v setpriv
WORKDIR /app
COPY --from=build /src/dist/control-plane.mjs /src/dist/node-agent.mjs /app/dist/
# ffi-rs and its binary for this platform: a replica at rest calls glibc's
# malloc_trim through it (control-plane/malloc-trim.ts); esbuild cannot bundle
# a native add-on, so it is resolved beside the bundles at run time.
COPY --from=build /src/dist/node_modules /app/dist/node_modules
# The web dashboard's files (served at / by every replica, read beside dist/).
COPY --from=build /src/dashboard /app/dashboard
# A node container's entrypoint: puts the container's processes in a leaf
# cgroup (cgroup v2) so the agent can give units cgroups of their own.
COPY docker/node-entrypoint.sh /app/node-entrypoint.sh
# /data holds a replica's state, /ca the cluster CA the replicas share
# (docs/kubernetes-api.md); created here, owned by the unprivileged user,
# so a fresh named volume mounted over either starts with that owner.
RUN mkdir -p /data /ca && chown node:node /data /ca
USER node
ENV NODE_ENV=production
# Which process a container is comes from docker-compose.yml's `command`.
CMD ["node", "dist/node-agent.mjs", "--help"]
