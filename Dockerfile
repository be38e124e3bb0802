# Arbiter's image: the compiled server (npm run build) on Node.js 24 LTS with OPA inside, run as
# the unprivileged `node` user, its SQLite store on the /data volume. Build: `docker build -t
# arbiter .`; run: README "Production". Several nodes share one PostgreSQL instead (the recommended
# store for more than one node), e.g.:
#   docker run -e STORE_URL='postgres://arbiter:<password>@db:5432/arbiter?pool_size=10' \
#     -e SERVICE_SECRETS_KEY=… -e ISSUER=https://auth.example.com arbiter The versions are the ones scripts/runtime.sh and
# scripts/install-opa.sh install (test/operations/image.test.ts keeps them equal).
ARG NODE_VERSION=24.21.0
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS opa
ARG OPA_VERSION=v1.21.1
RUN CGO_ENABLED=0 GOBIN=/out go install "github.com/open-policy-agent/opa@${OPA_VERSION}"

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY adapters ./adapters
# The build is `npm run build`'s (scripts/build.sh: the server into dist/, the console into
# dist/console/), then the devDependencies it needed (typescript, tsx, esbuild) are dropped.
RUN bash scripts/build.sh && npm prune --omit=dev

FROM node:${NODE_VERSION}-bookworm-slim
ENV NODE_ENV=production \
    PORT=9000 \
    STORE_URL=sqlite:/data/arbiter.db \
    OPA_BIN=/usr/local/bin/opa
WORKDIR /app
COPY --from=opa /out/opa /usr/local/bin/opa
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The compiled server reads these from the image as from a checkout (src/config/paths.ts): its
# defaults and the default policy pack. No sources: the console is served as built in dist/console/.
COPY package.json ./
COPY config ./config
COPY policies ./policies
COPY scripts/arbiter.sh scripts/runtime.sh ./scripts/
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 9000
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||9000)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# --max-semi-space-size: the server's Node.js options (src/workers/node-flags.ts).
CMD ["node", "--enable-source-maps", "--max-semi-space-size=8", "dist/src/main.js"]
