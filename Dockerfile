# rayqueue on the official Ray image, at the Ray version pyproject.toml pins.
FROM rayproject/ray:2.60.0-py311

WORKDIR /home/ray/rayqueue
COPY --chown=ray:users pyproject.toml README.md ./
COPY --chown=ray:users specs ./specs
COPY --chown=ray:users reconciler ./reconciler
COPY --chown=ray:users api ./api
COPY --chown=ray:users examples ./examples
RUN pip install --no-cache-dir .

# The image's own non-root user.
USER ray
ENV RAY_DASHBOARD_ADDRESS=http://head:8265
EXPOSE 8264
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8264/healthz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["rayqueue", "serve", "--dir", "/tasks", "--host", "0.0.0.0"]
