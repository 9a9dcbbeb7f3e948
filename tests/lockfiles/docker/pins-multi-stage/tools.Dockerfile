FROM scratch AS empty
FROM alpine:3.19@sha256:51b67269f354137895d43f3b3d810bfacd3945438e94dc5ac55fdac340352f48
COPY --from=empty / /
ADD https://github.com/krallin/tini/releases/download/v0.19.0/tini-static /sbin/tini
