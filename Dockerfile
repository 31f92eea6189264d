# One image for every role: IDMINT_ROLES=api|refill|responder (comma-separated), or all that the
# configured servers allow. Build: docker build -t idmint .   Run: see compose/docker-compose.yml.

# --- build: compile TypeScript to dist/ with the dev dependencies
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY types ./types
COPY src ./src
COPY workers ./workers
COPY scripts/build.mjs ./scripts/
COPY bin ./bin
RUN node scripts/build.mjs && npm prune --omit=dev --no-audit --no-fund

# --- runtime: production dependencies and compiled code only, as an unprivileged user
FROM node:24-bookworm-slim
ENV NODE_ENV=production \
    IDMINT_HOST=0.0.0.0 \
    IDMINT_PORT=8080 \
    IDMINT_DATA_DIR=/var/lib/idmint
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY src/pool/redis/lua ./src/pool/redis/lua
COPY src/worker-id/lua ./src/worker-id/lua
RUN mkdir -p /var/lib/idmint && chown node:node /var/lib/idmint
USER node
VOLUME ["/var/lib/idmint"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.IDMINT_PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Signals reach node directly (exec form); run with --init (compose: init: true) to reap children.
ENTRYPOINT ["node", "bin/idmint.js"]
CMD ["serve"]
