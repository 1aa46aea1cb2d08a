DROP TABLE deploy_templates;
