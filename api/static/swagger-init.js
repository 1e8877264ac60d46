// Starts Swagger UI on /docs. A file, not an inline script, so the page's Content-Security-Policy
// can allow scripts from this server only (api/frontdoor.py).
window.ui = SwaggerUIBundle({
  url: "openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  validatorUrl: null, // no badge fetched from validator.swagger.io
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
