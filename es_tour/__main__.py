from es_tour.cli import app

app(prog_name="es-tour")
